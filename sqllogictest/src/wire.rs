//! A raw Postgres-protocol client, for tests that send what no driver would: messages
//! pipelined ahead of authentication, truncated frames, bytes that are not the protocol.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One backend message: its type byte and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendMessage {
    pub kind: u8,
    pub body: Vec<u8>,
}

impl BackendMessage {
    /// For an ErrorResponse or NoticeResponse: the field with this code (`b'S'` severity,
    /// `b'C'` SQLSTATE, `b'M'` message).
    pub fn field(&self, code: u8) -> Option<String> {
        let mut rest = self.body.as_slice();
        while let Some((&field, tail)) = rest.split_first() {
            if field == 0 {
                break;
            }
            let end = tail.iter().position(|&b| b == 0)?;
            if field == code {
                return Some(String::from_utf8_lossy(&tail[..end]).into_owned());
            }
            rest = &tail[end + 1..];
        }
        None
    }

    pub fn is_error(&self) -> bool {
        self.kind == b'E'
    }
}

/// A message with a type byte: `kind`, the length, `body`.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 5);
    out.push(kind);
    out.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// A startup packet (protocol 3.0) with these parameters.
pub fn startup(parameters: &[(&str, &str)]) -> Vec<u8> {
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for (name, value) in parameters {
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut out = (body.len() as i32 + 4).to_be_bytes().to_vec();
    out.extend(body);
    out
}

/// The SSLRequest packet.
pub fn ssl_request() -> Vec<u8> {
    let mut out = 8i32.to_be_bytes().to_vec();
    out.extend_from_slice(&80_877_103i32.to_be_bytes());
    out
}

/// A simple Query message.
pub fn query(sql: &str) -> Vec<u8> {
    let mut body = sql.as_bytes().to_vec();
    body.push(0);
    message(b'Q', &body)
}

/// Parse (unnamed statement, no parameter types).
pub fn parse(sql: &str) -> Vec<u8> {
    let mut body = vec![0];
    body.extend_from_slice(sql.as_bytes());
    body.push(0);
    body.extend_from_slice(&0i16.to_be_bytes());
    message(b'P', &body)
}

/// Bind of the unnamed statement to the unnamed portal, no parameters, text results.
pub fn bind() -> Vec<u8> {
    let mut body = vec![0, 0];
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    message(b'B', &body)
}

/// Execute of the unnamed portal with a row limit (0: all rows).
pub fn execute(max_rows: i32) -> Vec<u8> {
    let mut body = vec![0];
    body.extend_from_slice(&max_rows.to_be_bytes());
    message(b'E', &body)
}

pub fn sync() -> Vec<u8> {
    message(b'S', &[])
}

/// A SASLInitialResponse naming `mechanism` with no data.
pub fn sasl_initial(mechanism: &str) -> Vec<u8> {
    let mut body = mechanism.as_bytes().to_vec();
    body.push(0);
    body.extend_from_slice(&(-1i32).to_be_bytes());
    message(b'p', &body)
}

/// A cleartext PasswordMessage.
pub fn password(text: &str) -> Vec<u8> {
    let mut body = text.as_bytes().to_vec();
    body.push(0);
    message(b'p', &body)
}

/// A connection that writes raw bytes and reads backend messages.
pub struct RawConnection {
    stream: TcpStream,
    buffer: Vec<u8>,
    closed: bool,
}

impl RawConnection {
    pub async fn connect(address: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buffer: Vec::new(),
            closed: false,
        })
    }

    /// Sends bytes in one write (several messages pipelined, if they hold several).
    pub async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).await?;
        Ok(())
    }

    /// Closes the sending side: the server reads what was sent, then the end of the stream.
    pub async fn finish_sending(&mut self) -> Result<()> {
        self.stream.shutdown().await?;
        Ok(())
    }

    /// Whether the server closed the connection (seen by a read).
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// The next message, waiting up to `timeout`; `None` when the server closed the
    /// connection (or reset it) or nothing came in time.
    pub async fn next(&mut self, timeout: Duration) -> Option<BackendMessage> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(message) = self.take_message() {
                return Some(message);
            }
            if self.closed {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let mut chunk = [0u8; 8192];
            match tokio::time::timeout(left, self.stream.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) => self.closed = true,
                Ok(Ok(n)) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(_) => return None,
            }
        }
    }

    /// Messages until ReadyForQuery (included), the connection's end or `timeout`.
    pub async fn until_ready(&mut self, timeout: Duration) -> Vec<BackendMessage> {
        let deadline = Instant::now() + timeout;
        let mut messages = Vec::new();
        while let Some(message) = self
            .next(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            let ready = message.kind == b'Z';
            messages.push(message);
            if ready {
                break;
            }
        }
        messages
    }

    /// Every message until the server closes the connection (or `timeout`).
    pub async fn until_closed(&mut self, timeout: Duration) -> Vec<BackendMessage> {
        let deadline = Instant::now() + timeout;
        let mut messages = Vec::new();
        while let Some(message) = self
            .next(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            messages.push(message);
        }
        messages
    }

    /// One byte of a reply to SSLRequest (`S` or `N`), before any message.
    pub async fn ssl_answer(&mut self, timeout: Duration) -> Option<u8> {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(timeout, self.stream.read_exact(&mut byte)).await {
            Ok(Ok(_)) => Some(byte[0]),
            _ => None,
        }
    }

    fn take_message(&mut self) -> Option<BackendMessage> {
        if self.buffer.len() < 5 {
            return None;
        }
        let length = i32::from_be_bytes([
            self.buffer[1],
            self.buffer[2],
            self.buffer[3],
            self.buffer[4],
        ]);
        let total = 1 + length.max(4) as usize;
        if self.buffer.len() < total {
            return None;
        }
        let message = BackendMessage {
            kind: self.buffer[0],
            body: self.buffer[5..total].to_vec(),
        };
        self.buffer.drain(..total);
        Some(message)
    }
}
