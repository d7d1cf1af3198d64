//! One client connection, from its first byte to its last.
//!
//! pgwire decodes the messages and runs Eddy's handlers, but the loop that reads them and
//! decides what may come next is Eddy's: pgwire 0.41's `process_socket` goes on reading after
//! it sends a FATAL error (its error path sets the state to ReadyForQuery before closing), so a
//! client that pipelined a Query behind a failing password had the query run. Here:
//!
//! - until authentication completes, only the startup packet and password messages are read;
//!   anything else, and every authentication failure, is FATAL; after a FATAL error nothing
//!   more from the connection is acted on;
//! - failed logins are answered late ([`crate::wire::login_throttle`]), logged and counted
//!   ([`crate::wire::failed_logins`]), and a wrong user name and a wrong password fail the same way
//!   (`28P01`, same message, same exchange);
//! - TLS: the SSLRequest is read on its own, with no read-ahead, so bytes sent in the clear
//!   before the handshake can never pass for part of the encrypted session;
//! - every message is bounded and its layout checked before pgwire decodes it
//!   ([`crate::wire::frame`]); a malformed one is `08P01`, a too-long one `54001`/`54000`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::SinkExt;
use pgwire::api::{
    ClientInfo, DefaultClient, ErrorHandler, PgWireConnectionState, PgWireServerHandlers,
};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{process_error, process_message, MaybeTls, PgWireMessageServerCodec};
use pgwire::tokio::TlsAcceptor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Decoder, Framed, FramedParts};

use crate::wire::failed_logins::{self, Reason};
use crate::wire::frame::{
    check_layout, check_startup, read_frame, release_idle_buffer, Frame, FrameError,
    PasswordLayout, MAX_AUTHENTICATION_LENGTH, MAX_STARTUP_LENGTH,
};
use crate::wire::login_throttle::LoginThrottle;

/// How every connection is served.
pub struct ConnectionOptions {
    pub tls: Option<TlsAcceptor>,
    /// The longest statement accepted; a message may be a little longer (the fields around
    /// a statement, or a Bind's parameters).
    pub max_statement_length: usize,
    /// Time allowed from connecting to the end of authentication (Postgres' 60 s).
    pub startup_timeout: Duration,
    pub throttle: Arc<LoginThrottle>,
}

impl ConnectionOptions {
    pub fn new(tls: Option<TlsAcceptor>, max_statement_length: usize) -> Self {
        Self {
            tls,
            max_statement_length,
            startup_timeout: Duration::from_secs(60),
            throttle: Arc::new(LoginThrottle::default()),
        }
    }
}

type Socket<ST> = Framed<MaybeTls, PgWireMessageServerCodec<ST>>;

const SSL_REQUEST: i32 = 80_877_103;
const GSS_ENCRYPTION_REQUEST: i32 = 80_877_104;
/// The ALPN protocol a direct TLS connection (no SSLRequest first) must name.
pub const POSTGRESQL_ALPN: &[u8] = b"postgresql";
/// Room for a message's fields besides its statement.
const MESSAGE_FIELDS: usize = 64 * 1024;
/// A write buffer emptied with more capacity than this is given back.
const KEPT_WRITE_CAPACITY: usize = 64 * 1024;

/// Serves one connection until the client leaves or a FATAL error ends it.
pub async fn serve<H: PgWireServerHandlers>(
    tcp: TcpStream,
    handlers: &H,
    options: &ConnectionOptions,
) -> io::Result<()> {
    let peer = tcp.peer_addr()?;
    let deadline = tokio::time::sleep(options.startup_timeout);
    tokio::pin!(deadline);
    let negotiated = tokio::select! {
        () = &mut deadline => {
            failed_logins::record(peer, "", Reason::Timeout);
            return Ok(());
        }
        negotiated = negotiate(tcp, options.tls.as_ref()) => negotiated?,
    };
    let Some(mut socket) = negotiated else {
        return Ok(());
    };
    let startup = handlers.startup_handler();
    let simple = handlers.simple_query_handler();
    let extended = handlers.extended_query_handler();
    let copy = handlers.copy_handler();
    let cancel = handlers.cancel_handler();
    let errors = handlers.error_handler();
    let mut password_messages = 0usize;
    loop {
        let state = socket.state();
        let authenticating = matches!(
            state,
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let typed = !matches!(state, PgWireConnectionState::AwaitingStartup);
        let limit = match (typed, authenticating) {
            (false, _) => MAX_STARTUP_LENGTH,
            (true, true) => MAX_AUTHENTICATION_LENGTH,
            (true, false) => options.max_statement_length.saturating_add(MESSAGE_FIELDS),
        };
        let mut buffer = std::mem::take(socket.read_buffer_mut());
        // Who the client said it is, for the log of a failed login.
        let user = |socket: &Socket<_>| socket.metadata().get("user").cloned().unwrap_or_default();
        let read = if authenticating {
            tokio::select! {
                () = &mut deadline => {
                    failed_logins::record(peer, &user(&socket), Reason::Timeout);
                    return Ok(());
                }
                read = read_frame(socket.get_mut(), &mut buffer, typed, limit) => read,
            }
        } else {
            read_frame(socket.get_mut(), &mut buffer, typed, limit).await
        };
        release_idle_buffer(&mut buffer);
        *socket.read_buffer_mut() = buffer;
        let mut frame = match read {
            Ok(Frame::Message(frame)) => frame,
            Ok(Frame::Closed) => return Ok(()),
            Ok(Frame::TooLong { kind, length }) => {
                if authenticating {
                    failed_logins::record(peer, &user(&socket), Reason::Protocol);
                    return fatal(
                        &mut socket,
                        "08P01",
                        format!("invalid message length {length}"),
                    )
                    .await;
                }
                let info = too_long(kind, length, options.max_statement_length);
                report(&mut socket, info, is_extended_kind(kind)).await?;
                continue;
            }
            Err(FrameError::Io(error)) => return Err(error),
            Err(FrameError::Malformed(message)) => {
                if authenticating {
                    failed_logins::record(peer, &user(&socket), Reason::Protocol);
                }
                return fatal(&mut socket, "08P01", message).await;
            }
        };
        let checked = if typed {
            let layout = if authenticating && password_messages == 0 {
                PasswordLayout::SaslInitial
            } else {
                PasswordLayout::Opaque
            };
            check_layout(&frame, layout)
        } else {
            check_startup(&frame)
        };
        if let Err(message) = checked {
            if authenticating {
                failed_logins::record(peer, &user(&socket), Reason::Protocol);
                return fatal(&mut socket, "08P01", message).await;
            }
            let info = ErrorInfo::new("ERROR".into(), "08P01".into(), message);
            report(&mut socket, info, is_extended_kind(frame[0])).await?;
            continue;
        }
        let kind = if typed { frame[0] } else { 0 };
        let message = match socket.codec_mut().decode(&mut frame) {
            Ok(Some(message)) => Ok(message),
            Ok(None) => Err(ErrorInfo::new(
                "FATAL".into(),
                "08P01".into(),
                "incomplete message".into(),
            )),
            Err(error) => Err(ErrorInfo::from(error)),
        };
        let message = match message {
            Ok(message) => message,
            Err(info) => {
                if authenticating {
                    failed_logins::record(peer, &user(&socket), Reason::Protocol);
                }
                return fatal_info(&mut socket, info).await;
            }
        };
        // Postgres reads a negative row limit as "no limit"; pgwire would cast it to a huge
        // capacity and panic.
        let message = match message {
            PgWireFrontendMessage::Execute(mut execute) => {
                execute.max_rows = execute.max_rows.max(0);
                PgWireFrontendMessage::Execute(execute)
            }
            other => other,
        };
        let message = match admit(message, state, kind) {
            Ok(Some(message)) => message,
            Ok(None) => return Ok(()),
            Err(refusal) => {
                if authenticating {
                    failed_logins::record(peer, &user(&socket), Reason::Protocol);
                }
                return fatal(&mut socket, "08P01", refusal).await;
            }
        };
        if matches!(message, PgWireFrontendMessage::PasswordMessageFamily(_)) {
            password_messages += 1;
        }
        let is_cancel = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        let extended_protocol = match state {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
        let result = process_message(
            message,
            &mut socket,
            startup.clone(),
            simple.clone(),
            extended.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await;
        if is_cancel {
            return Ok(());
        }
        match result {
            Ok(()) if authenticating => {
                if matches!(socket.state(), PgWireConnectionState::ReadyForQuery) {
                    options.throttle.succeeded(peer.ip());
                }
            }
            Ok(()) => {}
            Err(error) if authenticating => {
                let user = user(&socket);
                failed_logins::record(peer, &user, Reason::of(&error));
                tokio::time::sleep(options.throttle.failed(peer.ip())).await;
                return fatal_info(&mut socket, authentication_failure(error, &user)).await;
            }
            Err(mut error) => {
                errors.on_error(&socket, &mut error);
                let info = ErrorInfo::from(error);
                if info.is_fatal() {
                    return fatal_info(&mut socket, info).await;
                }
                report(&mut socket, info, extended_protocol).await?;
            }
        }
        if socket.write_buffer().is_empty()
            && socket.write_buffer().capacity() > KEPT_WRITE_CAPACITY
        {
            *socket.write_buffer_mut() = BytesMut::new();
        }
    }
}

/// Refuses a connection the server has no room for: its startup packet is read (so that the
/// client reads the answer), then a FATAL error with `code` ends it.
pub async fn refuse(
    tcp: TcpStream,
    options: &ConnectionOptions,
    code: &str,
    message: String,
) -> io::Result<()> {
    let refusal = async {
        let Some(mut socket) = negotiate::<()>(tcp, options.tls.as_ref()).await? else {
            return Ok(());
        };
        let mut buffer = std::mem::take(socket.read_buffer_mut());
        let read = read_frame(socket.get_mut(), &mut buffer, false, MAX_STARTUP_LENGTH).await;
        if matches!(read, Ok(Frame::Message(_))) {
            fatal(&mut socket, code, message).await?;
        }
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(5), refusal)
        .await
        .unwrap_or(Ok(()))
}

/// Whether `message` may come now. `Ok(None)`: the client is leaving. `Err`: a message that
/// breaks the protocol (before authentication completes, anything but its own messages).
fn admit(
    message: PgWireFrontendMessage,
    state: PgWireConnectionState,
    kind: u8,
) -> Result<Option<PgWireFrontendMessage>, String> {
    use PgWireConnectionState::{AuthenticationInProgress, AwaitingStartup};
    use PgWireFrontendMessage as M;
    match (&message, state) {
        (M::Terminate(_), _) => Ok(None),
        (M::Startup(_) | M::CancelRequest(_), AwaitingStartup) => Ok(Some(message)),
        (M::PasswordMessageFamily(_), AuthenticationInProgress) => Ok(Some(message)),
        (_, AwaitingStartup | AuthenticationInProgress) => Err(format!(
            "expected password response, got message type {}",
            char::from(kind)
        )),
        (M::PasswordMessageFamily(_) | M::Startup(_) | M::CancelRequest(_), _) => Err(format!(
            "invalid frontend message type {}",
            char::from(kind)
        )),
        _ => Ok(Some(message)),
    }
}

/// Every failed login looks alike: a wrong password and an unknown user both end the SCRAM
/// exchange with `28P01` and the same words.
fn authentication_failure(error: PgWireError, user: &str) -> ErrorInfo {
    match error {
        PgWireError::InvalidPassword(_) => ErrorInfo::new(
            "FATAL".into(),
            "28P01".into(),
            format!("password authentication failed for user \"{user}\""),
        ),
        // A message out of place in the exchange (pgwire calls it an internal error).
        PgWireError::InvalidSASLState | PgWireError::FailedToCoercePasswordMessage => {
            ErrorInfo::new(
                "FATAL".into(),
                "08P01".into(),
                "unexpected message in the authentication exchange".into(),
            )
        }
        other => ErrorInfo::from(other),
    }
}

fn too_long(kind: u8, length: usize, limit: usize) -> ErrorInfo {
    let (code, what) = match kind {
        b'Q' | b'P' => ("54001", "statement"),
        _ => ("54000", "message"),
    };
    let mut info = ErrorInfo::new(
        "ERROR".into(),
        code.into(),
        format!("{what} is too long: {length} bytes (the limit is {limit} bytes)"),
    );
    info.hint = Some("the server's --max-statement-size sets the limit".into());
    info
}

/// Messages of the extended protocol, after whose error the server waits for a Sync.
fn is_extended_kind(kind: u8) -> bool {
    matches!(kind, b'P' | b'B' | b'C' | b'D' | b'E' | b'H' | b'S')
}

/// Sends an error that leaves the connection usable (ReadyForQuery, or waiting for Sync).
async fn report<ST>(socket: &mut Socket<ST>, info: ErrorInfo, extended: bool) -> io::Result<()> {
    process_error(socket, PgWireError::UserError(Box::new(info)), extended).await
}

async fn fatal<ST>(socket: &mut Socket<ST>, code: &str, message: String) -> io::Result<()> {
    fatal_info(socket, ErrorInfo::new("FATAL".into(), code.into(), message)).await
}

/// Sends a FATAL error and ends the connection; nothing it sends afterwards is acted on.
async fn fatal_info<ST>(socket: &mut Socket<ST>, mut info: ErrorInfo) -> io::Result<()> {
    info.severity = "FATAL".into();
    let _ = socket
        .send(PgWireBackendMessage::ErrorResponse(info.into()))
        .await;
    let _ = socket.close().await;
    // Closing a socket with unread input resets it, which can destroy the error before the
    // client reads it: what is already on its way is read and thrown away (bounded).
    let discard = async {
        let mut scratch = [0u8; 8192];
        let mut left = 1usize << 20;
        while left > 0 {
            match socket.get_mut().read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(read) => left = left.saturating_sub(read),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(200), discard).await;
    Ok(())
}

/// TLS negotiation. A request is read exactly (8 bytes, nothing more), so that after the
/// server agrees to TLS no byte sent in the clear is left to be taken for encrypted input.
async fn negotiate<ST>(
    tcp: TcpStream,
    tls: Option<&TlsAcceptor>,
) -> io::Result<Option<Socket<ST>>> {
    let address: SocketAddr = tcp.peer_addr()?;
    tcp.set_nodelay(true)?;
    let mut tcp = tcp;
    let mut first = [0u8; 1];
    // A TLS ClientHello right away: direct TLS (Postgres 17's sslnegotiation=direct).
    let direct = tcp.peek(&mut first).await? == 1 && first[0] == 0x16;
    let mut read_ahead = BytesMut::new();
    let mut encrypt = direct;
    if !direct {
        let (mut ssl_answered, mut gss_answered) = (false, false);
        loop {
            let mut head = [0u8; 8];
            match tcp.read_exact(&mut head).await {
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(error) => return Err(error),
            }
            let length = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let code = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            if length == 8 && code == SSL_REQUEST && !ssl_answered {
                ssl_answered = true;
                if tls.is_some() {
                    tcp.write_all(b"S").await?;
                    encrypt = true;
                    break;
                }
                tcp.write_all(b"N").await?;
            } else if length == 8 && code == GSS_ENCRYPTION_REQUEST && !gss_answered {
                gss_answered = true;
                tcp.write_all(b"N").await?;
            } else {
                read_ahead.extend_from_slice(&head);
                break;
            }
        }
    }
    let (io, client) = if encrypt {
        let Some(acceptor) = tls else {
            return Ok(None);
        };
        let stream = acceptor.accept(tcp).await?;
        let (_, session) = stream.get_ref();
        if direct && session.alpn_protocol() != Some(POSTGRESQL_ALPN) {
            return Ok(None);
        }
        let mut client = DefaultClient::new(address, true);
        client.sni_server_name = session.server_name().map(str::to_string);
        (MaybeTls::Tls(Box::new(stream)), client)
    } else {
        (MaybeTls::Plain(tcp), DefaultClient::new(address, false))
    };
    let mut parts = FramedParts::new(io, PgWireMessageServerCodec::new(client));
    parts.read_buf = read_ahead;
    let mut socket = Framed::from_parts(parts);
    socket.set_state(PgWireConnectionState::AwaitingStartup);
    Ok(Some(socket))
}
