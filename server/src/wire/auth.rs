//! Who may connect: with no password configured, anyone (local trust); with one, SCRAM-SHA-256
//! (`28P01` and a closed connection on a wrong password or user name, which fail alike). TLS
//! when a certificate is given.

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{Sink, SinkExt};
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::sasl::scram::{gen_salted_password, random_nonce, ScramAuth};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::ClientInfo;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use pgwire::tokio::tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use pgwire::tokio::tokio_rustls::rustls::ServerConfig;
use pgwire::tokio::TlsAcceptor;

/// SCRAM's key-stretching rounds (the minimum the RFC allows, as Postgres' default).
const ITERATIONS: usize = 4096;

/// The credentials clients must present.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The one user name accepted; `None` accepts any name with the password.
    pub user: Option<String>,
    pub password: String,
}

/// The password as SCRAM stores it: salted and stretched once, at startup.
#[derive(Debug)]
pub struct PasswordStore {
    user: Option<String>,
    salt: Vec<u8>,
    salted: Vec<u8>,
    /// What an unknown user is checked against: random, so no proof matches it.
    decoy: Vec<u8>,
}

#[async_trait]
impl AuthSource for PasswordStore {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let name = login.user().unwrap_or_default();
        // An unknown user goes through the same exchange as a known one (same salt, same
        // messages) and fails at its end like a wrong password: nothing tells them apart.
        let salted = match &self.user {
            Some(user) if user != name => self.decoy.clone(),
            _ => self.salted.clone(),
        };
        Ok(Password::new(Some(self.salt.clone()), salted))
    }
}

/// Trust: any user, any database name (tools' defaults just work).
pub struct Trust;

#[async_trait]
impl NoopStartupHandler for Trust {
    /// pgwire's trust handler announces its own `server_version` (`16.6-pgwire-...`, which
    /// pg_dump refuses); a later ParameterStatus replaces it before the client is ready.
    async fn post_startup<C>(
        &self,
        client: &mut C,
        _message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        client
            .feed(PgWireBackendMessage::ParameterStatus(ParameterStatus::new(
                "server_version".to_string(),
                crate::pg::settings::SERVER_VERSION.to_string(),
            )))
            .await?;
        Ok(())
    }
}

/// The parameters announced at startup, with Eddy's Postgres version.
fn server_parameters() -> DefaultServerParameterProvider {
    let mut parameters = DefaultServerParameterProvider::default();
    parameters.server_version = crate::pg::settings::SERVER_VERSION.to_string();
    parameters
}

/// How clients authenticate; builds each connection's startup handler.
#[derive(Clone, Debug)]
pub enum Authentication {
    Trust,
    Scram(Arc<PasswordStore>),
}

impl Authentication {
    /// Trust without credentials; SCRAM-SHA-256 with them.
    pub fn new(credentials: Option<&Credentials>) -> Self {
        match credentials {
            None => Authentication::Trust,
            Some(credentials) => {
                // A fresh random salt per server start.
                let salt = random_nonce().into_bytes();
                Authentication::Scram(Arc::new(PasswordStore {
                    user: credentials.user.clone(),
                    salted: gen_salted_password(&credentials.password, &salt, ITERATIONS),
                    salt,
                    decoy: random_nonce().into_bytes(),
                }))
            }
        }
    }

    /// A startup handler for one connection (SCRAM keeps its exchange's state in it). No
    /// channel binding (SCRAM-SHA-256-PLUS): pgwire would offer it on plain connections
    /// too, which clients refuse.
    pub fn startup(&self) -> Startup {
        match self {
            Authentication::Trust => Startup::Trust(Trust),
            Authentication::Scram(store) => {
                let mut scram = ScramAuth::new(store.clone());
                scram.set_iterations(ITERATIONS);
                Startup::Scram(
                    SASLAuthStartupHandler::new(Arc::new(server_parameters())).with_scram(scram),
                )
            }
        }
    }
}

/// One connection's startup handler.
pub enum Startup {
    Trust(Trust),
    Scram(SASLAuthStartupHandler<DefaultServerParameterProvider>),
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self {
            Startup::Trust(trust) => trust.on_startup(client, message).await,
            Startup::Scram(scram) => scram.on_startup(client, message).await,
        }
    }
}

/// A TLS acceptor from a PEM certificate chain and a PEM private key.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let cert_pem = std::fs::read(cert)
        .map_err(|e| format!("cannot read the TLS certificate {}: {e}", cert.display()))?;
    let key_pem = std::fs::read(key)
        .map_err(|e| format!("cannot read the TLS key {}: {e}", key.display()))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{} is not a PEM certificate: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no certificate", cert.display()));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("{} is not a PEM private key: {e}", key.display()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| format!("the TLS certificate and key do not fit: {e}"))?;
    // Postgres 17 clients name it; direct TLS (no SSLRequest first) requires it.
    config.alpn_protocols = vec![crate::wire::connection::POSTGRESQL_ALPN.to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
