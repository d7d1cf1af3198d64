//! Client messages as whole frames, bounded and checked before pgwire decodes them.
//!
//! pgwire 0.41's decoders trust the fields they read: a Bind whose counts run past its length
//! reads into the next message or panics in `bytes` ("advance out of bounds"), and a declared
//! length of up to 1 GiB is buffered whole. Here a frame is cut out of the stream by its length
//! (bounded: a longer one is skipped without being buffered), and its fields are walked with
//! checked reads. pgwire then decodes the frame on its own, so it cannot read past it.

use std::io;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The longest startup packet accepted (Postgres' `MAX_STARTUP_PACKET_LENGTH`).
pub const MAX_STARTUP_LENGTH: usize = 10_000;
/// The longest message accepted while authenticating (passwords and SASL exchanges are small).
pub const MAX_AUTHENTICATION_LENGTH: usize = 10_000;

/// What reading the next message produced.
#[derive(Debug)]
pub enum Frame {
    /// A whole message: its type byte (none in a startup packet), its length and its body.
    Message(BytesMut),
    /// A message longer than the limit: skipped without being kept.
    TooLong { kind: u8, length: usize },
    /// The client closed the connection.
    Closed,
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Bytes that are not a message (a protocol violation, 08P01).
    #[error("{0}")]
    Malformed(String),
}

/// Reads the next message into `buffer` (which keeps what was read past it). `typed`: a
/// message with a type byte (every message but the startup packet).
pub async fn read_frame<S: AsyncRead + Unpin>(
    io: &mut S,
    buffer: &mut BytesMut,
    typed: bool,
    max_length: usize,
) -> Result<Frame, FrameError> {
    let header = if typed { 5 } else { 4 };
    if !fill(io, buffer, header).await? {
        return Ok(Frame::Closed);
    }
    let kind = if typed { buffer[0] } else { 0 };
    let declared = i32::from_be_bytes([
        buffer[header - 4],
        buffer[header - 3],
        buffer[header - 2],
        buffer[header - 1],
    ]);
    let shortest = if typed { 4 } else { 8 };
    if declared < shortest {
        return Err(FrameError::Malformed(if typed {
            format!("invalid message length {declared}")
        } else {
            "invalid length of startup packet".to_string()
        }));
    }
    let length = declared as usize;
    let total = header - 4 + length;
    if length > max_length {
        if !typed {
            return Err(FrameError::Malformed(
                "invalid length of startup packet".into(),
            ));
        }
        return Ok(if skip(io, buffer, total).await? {
            Frame::TooLong { kind, length }
        } else {
            Frame::Closed
        });
    }
    if !fill(io, buffer, total).await? {
        return Ok(Frame::Closed);
    }
    Ok(Frame::Message(buffer.split_to(total)))
}

/// Lets go of the buffer's memory once it holds nothing: after a message was cut out of it,
/// an empty buffer still shares (and keeps alive) the whole allocation that message was read
/// into, however large.
pub fn release_idle_buffer(buffer: &mut BytesMut) {
    if buffer.is_empty() {
        *buffer = BytesMut::new();
    }
}

/// Reads until `buffer` holds `wanted` bytes; false when the client closed first.
async fn fill<S: AsyncRead + Unpin>(
    io: &mut S,
    buffer: &mut BytesMut,
    wanted: usize,
) -> io::Result<bool> {
    if buffer.len() < wanted {
        // Room for what is missing, and for a few small messages behind it in one read.
        buffer.reserve((wanted - buffer.len()).max(8192));
    }
    while buffer.len() < wanted {
        if io.read_buf(buffer).await? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Discards `total` bytes, those already buffered first; false when the client closed first.
async fn skip<S: AsyncRead + Unpin>(
    io: &mut S,
    buffer: &mut BytesMut,
    total: usize,
) -> io::Result<bool> {
    let buffered = buffer.len().min(total);
    buffer.advance(buffered);
    let mut left = total - buffered;
    let mut scratch = vec![0u8; 64 * 1024];
    while left > 0 {
        let want = left.min(scratch.len());
        let read = io.read(&mut scratch[..want]).await?;
        if read == 0 {
            return Ok(false);
        }
        left -= read;
    }
    Ok(true)
}

/// How to read a password message ('p'), whose layout depends on the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordLayout {
    /// The first message of a SASL exchange: mechanism, then the length-prefixed data.
    SaslInitial,
    /// Any later one: opaque bytes.
    Opaque,
}

/// Checks that a typed message (type byte, length, body) holds exactly the fields its type
/// says. The error is Postgres' own wording for the same mistake.
pub fn check_layout(frame: &[u8], password: PasswordLayout) -> Result<(), String> {
    let (kind, body) = (frame[0], &frame[5..]);
    let mut fields = Fields { rest: body };
    match kind {
        b'Q' => {
            fields.cstring()?;
        }
        b'P' => {
            fields.cstring()?;
            fields.cstring()?;
            let types = fields.count()?;
            fields.skip(4 * types)?;
        }
        b'B' => {
            fields.cstring()?;
            fields.cstring()?;
            let formats = fields.count()?;
            fields.skip(2 * formats)?;
            let parameters = fields.count()?;
            // One format code for all parameters, or one each (pgwire indexes the codes by
            // parameter and would panic past their end).
            if formats > 1 && formats != parameters {
                return Err(format!(
                    "bind message has {formats} parameter formats but {parameters} parameters"
                ));
            }
            for _ in 0..parameters {
                match fields.i32()? {
                    -1 => {}
                    length if length >= 0 => fields.skip(length as usize)?,
                    length => return Err(format!("invalid parameter length {length}")),
                }
            }
            let results = fields.count()?;
            fields.skip(2 * results)?;
        }
        b'D' | b'C' => {
            let target = fields.byte()?;
            if target != b'S' && target != b'P' {
                let what = if kind == b'D' { "DESCRIBE" } else { "CLOSE" };
                return Err(format!("invalid {what} message subtype {target}"));
            }
            fields.cstring()?;
        }
        b'E' => {
            fields.cstring()?;
            fields.i32()?;
        }
        b'S' | b'H' | b'X' | b'c' => {}
        b'f' => {
            fields.cstring()?;
        }
        b'p' if password == PasswordLayout::SaslInitial => {
            fields.cstring()?;
            match fields.i32()? {
                -1 => {}
                length if length >= 0 => fields.skip(length as usize)?,
                _ => return Err("malformed SASL message".into()),
            }
        }
        // CopyData and later password messages are opaque; other types are pgwire's to
        // refuse (an unknown type is a FATAL protocol violation).
        _ => return Ok(()),
    }
    if !fields.rest.is_empty() {
        return Err("invalid message format".into());
    }
    Ok(())
}

/// Checks a startup packet (length, then the body): a protocol number, then `name\0value\0`
/// pairs closed by a `\0` (cancel and negotiation requests carry fixed fields instead).
pub fn check_startup(frame: &[u8]) -> Result<(), String> {
    let body = &frame[4..];
    let code = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    // Protocol 3.x; anything else (a cancel request, a repeated SSLRequest) is pgwire's.
    if code >> 16 != 3 {
        return Ok(());
    }
    let mut fields = Fields { rest: &body[4..] };
    loop {
        if fields.rest == [0] {
            return Ok(());
        }
        fields
            .cstring()
            .and_then(|_| fields.cstring())
            .map_err(|_| "invalid startup packet layout: expected terminator as last byte")?;
    }
}

/// Checked reads over a message body.
struct Fields<'a> {
    rest: &'a [u8],
}

const SHORT: &str = "insufficient data left in message";

impl Fields<'_> {
    fn skip(&mut self, n: usize) -> Result<(), String> {
        if self.rest.len() < n {
            return Err(SHORT.into());
        }
        self.rest = &self.rest[n..];
        Ok(())
    }

    fn byte(&mut self) -> Result<u8, String> {
        let (&first, rest) = self.rest.split_first().ok_or(SHORT)?;
        self.rest = rest;
        Ok(first)
    }

    fn i16(&mut self) -> Result<i16, String> {
        let bytes = self.rest.get(..2).ok_or(SHORT)?;
        let value = i16::from_be_bytes([bytes[0], bytes[1]]);
        self.rest = &self.rest[2..];
        Ok(value)
    }

    fn i32(&mut self) -> Result<i32, String> {
        let bytes = self.rest.get(..4).ok_or(SHORT)?;
        let value = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        self.rest = &self.rest[4..];
        Ok(value)
    }

    /// An element count (an int16 that cannot be negative).
    fn count(&mut self) -> Result<usize, String> {
        let count = self.i16()?;
        usize::try_from(count).map_err(|_| format!("invalid element count {count}"))
    }

    fn cstring(&mut self) -> Result<(), String> {
        let end = self
            .rest
            .iter()
            .position(|&b| b == 0)
            .ok_or("invalid string in message")?;
        self.rest = &self.rest[end + 1..];
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut frame = vec![kind];
        frame.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        frame.extend_from_slice(body);
        frame
    }

    #[test]
    fn well_formed_messages_pass() {
        let mut bind = b"\0\0".to_vec();
        bind.extend_from_slice(&1i16.to_be_bytes());
        bind.extend_from_slice(&0i16.to_be_bytes());
        bind.extend_from_slice(&2i16.to_be_bytes());
        bind.extend_from_slice(&(-1i32).to_be_bytes());
        bind.extend_from_slice(&3i32.to_be_bytes());
        bind.extend_from_slice(b"abc");
        bind.extend_from_slice(&0i16.to_be_bytes());
        for frame in [
            message(b'Q', b"SELECT 1\0"),
            message(b'B', &bind),
            message(b'D', b"S\0"),
            message(b'E', b"\0\0\0\0\x05"),
            message(b'S', b""),
        ] {
            assert_eq!(check_layout(&frame, PasswordLayout::Opaque), Ok(()));
        }
    }

    #[test]
    fn truncated_and_padded_messages_are_refused() {
        // Five format codes announced, none present.
        let bind = message(b'B', b"\0\0\x00\x05");
        assert_eq!(
            check_layout(&bind, PasswordLayout::Opaque),
            Err(SHORT.into())
        );
        let parse = message(b'P', b"\0SELECT 1");
        assert!(check_layout(&parse, PasswordLayout::Opaque).is_err());
        let describe = message(b'D', b"");
        assert_eq!(
            check_layout(&describe, PasswordLayout::Opaque),
            Err(SHORT.into())
        );
        let describe = message(b'D', b"X\0");
        assert!(check_layout(&describe, PasswordLayout::Opaque).is_err());
        let query = message(b'Q', b"SELECT 1\0junk");
        assert_eq!(
            check_layout(&query, PasswordLayout::Opaque),
            Err("invalid message format".into())
        );
        // Two parameter format codes for one parameter.
        let mut bind = b"\0\0".to_vec();
        for value in [2i16, 0, 1, 1] {
            bind.extend_from_slice(&value.to_be_bytes());
        }
        bind.extend_from_slice(&(-1i32).to_be_bytes());
        bind.extend_from_slice(&0i16.to_be_bytes());
        assert_eq!(
            check_layout(&message(b'B', &bind), PasswordLayout::Opaque),
            Err("bind message has 2 parameter formats but 1 parameters".into())
        );
        let negative_count = message(b'P', b"\0SELECT 1\0\xff\xff");
        assert!(check_layout(&negative_count, PasswordLayout::Opaque).is_err());
        // A cleartext password where a SASL initial response belongs.
        let password = message(b'p', b"wrong\0");
        assert_eq!(
            check_layout(&password, PasswordLayout::SaslInitial),
            Err(SHORT.into())
        );
    }

    #[test]
    fn startup_packets_need_their_terminator() {
        let packet = |body: &[u8]| {
            let mut frame = ((body.len() + 8) as i32).to_be_bytes().to_vec();
            frame.extend_from_slice(&196608i32.to_be_bytes());
            frame.extend_from_slice(body);
            frame
        };
        assert_eq!(check_startup(&packet(b"user\0eddy\0\0")), Ok(()));
        assert!(check_startup(&packet(b"user\0eddy\0")).is_err());
        assert!(check_startup(&packet(b"user\0eddy")).is_err());
    }

    #[tokio::test]
    async fn frames_are_cut_by_length_and_long_ones_skipped() {
        let mut input = message(b'Q', b"SELECT 1\0");
        input.extend(message(b'Q', &[b'x'; 100]));
        input.extend(message(b'S', b""));
        let mut reader: &[u8] = &input;
        let mut buffer = BytesMut::new();
        let first = read_frame(&mut reader, &mut buffer, true, 50)
            .await
            .unwrap();
        assert!(matches!(first, Frame::Message(f) if f.len() == 14));
        let second = read_frame(&mut reader, &mut buffer, true, 50)
            .await
            .unwrap();
        assert!(matches!(
            second,
            Frame::TooLong {
                kind: b'Q',
                length: 104
            }
        ));
        let third = read_frame(&mut reader, &mut buffer, true, 50)
            .await
            .unwrap();
        assert!(matches!(third, Frame::Message(f) if f.as_ref() == b"S\0\0\0\x04"));
        let end = read_frame(&mut reader, &mut buffer, true, 50)
            .await
            .unwrap();
        assert!(matches!(end, Frame::Closed));
        let mut short: &[u8] = b"Q\0\0\0\x02";
        let error = read_frame(&mut short, &mut BytesMut::new(), true, 50).await;
        assert!(matches!(error, Err(FrameError::Malformed(_))));
    }
}
