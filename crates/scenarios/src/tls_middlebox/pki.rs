//! The endpoints' TLS configuration (rustls, TLS 1.2, `ECDHE_RSA_WITH_AES_256_GCM_SHA384`
//! only; certificates from rcgen) and the out-of-band key share: the client's key log seals
//! the session's master secret to the enclave's key and hands it to the middlebox before the
//! client sends its ChangeCipherSpec, so the share is in the enclave before the first
//! encrypted record. A share channel exists only for an [`AttestedEngine`]: the enclave's
//! key whose (emulated) quote the endpoint verified ([`super::service::verify_engine`]).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, KeyLog, RootCertStore, ServerConfig};

use super::service::{AttestedEngine, KeyShare, seal_share};
use harness::At;
use harness::ScenarioError;

/// The server name the certificate is for.
pub const SERVER_NAME: &str = "middlebox.ccbench.test";

/// A certificate authority and a server certificate with its RSA-2048 key.
pub struct Pki {
    root: CertificateDer<'static>,
    chain: Vec<CertificateDer<'static>>,
    key: Vec<u8>,
}

impl Pki {
    /// Generates a fresh root and server certificate (RSA-2048: the suite is ECDHE_RSA).
    pub fn generate() -> Result<Pki, ScenarioError> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose, RsaKeySize,
        };
        let rsa = || KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048);
        let root_key = rsa().at("generating the root key")?;
        let mut p = CertificateParams::default();
        p.distinguished_name
            .push(DnType::CommonName, "ccbench tls-middlebox root");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let root = p.self_signed(&root_key).at("signing the root")?;
        let issuer = Issuer::new(p, &root_key);
        let leaf_key = rsa().at("generating the server key")?;
        let mut p = CertificateParams::new(vec![SERVER_NAME.to_owned()]).at("server name")?;
        p.distinguished_name.push(DnType::CommonName, SERVER_NAME);
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.not_before = rcgen::date_time_ymd(2024, 1, 1);
        p.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let leaf = p
            .signed_by(&leaf_key, &issuer)
            .at("signing the server certificate")?;
        Ok(Pki {
            root: root.der().clone(),
            chain: vec![leaf.der().clone()],
            key: leaf_key.serialize_der(),
        })
    }
}

/// aws-lc-rs with the one suite the paper used.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(CryptoProvider {
        cipher_suites: vec![
            rustls::crypto::aws_lc_rs::cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ],
        ..rustls::crypto::aws_lc_rs::default_provider()
    })
}

/// The server's configuration: TLS 1.2 only, the one suite.
pub fn server_config(pki: &Pki) -> Result<Arc<ServerConfig>, ScenarioError> {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.key.clone()));
    let c = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .at("server protocol versions")?
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), key)
        .at("server certificate")?;
    Ok(Arc::new(c))
}

/// The client's configuration: TLS 1.2 only, the one suite, `key_log` for the session
/// secrets. Secret extraction stays off (rustls's default), here and in the server's
/// configuration: the middlebox gets its key share from `key_log`, and only the tests that
/// check our key schedule against rustls's own keys turn it on.
pub fn client_config(
    pki: &Pki,
    key_log: Arc<dyn KeyLog>,
) -> Result<Arc<ClientConfig>, ScenarioError> {
    let mut roots = RootCertStore::empty();
    roots.add(pki.root.clone()).at("client trust anchor")?;
    let mut c = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .at("client protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.key_log = key_log;
    // Every connection a full handshake: each flow needs its own key share.
    c.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(c))
}

/// What a key log hands over: a client random and the master secret, in the clear inside
/// the endpoint's process only.
pub type ShareFn = dyn Fn([u8; 32], &[u8]) + Send + Sync;

/// The client's key log: `CLIENT_RANDOM` lines go to a function (the out-of-band share).
pub struct ShareLog(pub Arc<ShareFn>);

impl std::fmt::Debug for ShareLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShareLog")
    }
}

impl KeyLog for ShareLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        if label == "CLIENT_RANDOM"
            && let Ok(cr) = <[u8; 32]>::try_from(client_random)
        {
            (self.0)(cr, secret);
        }
    }

    fn will_log(&self, label: &str) -> bool {
        label == "CLIENT_RANDOM"
    }
}

/// How an endpoint's key share reaches the middlebox: sealed to the attested engine key,
/// then sent over a channel to the middlebox's key-share listener, which acknowledges once
/// the enclave holds it.
#[derive(Clone)]
pub struct ShareChannel {
    engine: AttestedEngine,
    tx: SyncSender<(KeyShare, SyncSender<()>)>,
}

impl ShareChannel {
    /// A channel to the engine whose attested key is `engine`, and its receiving end.
    pub fn new(engine: AttestedEngine) -> (Self, Receiver<(KeyShare, SyncSender<()>)>) {
        let (tx, rx) = sync_channel(64);
        (ShareChannel { engine, tx }, rx)
    }

    /// Seals and sends one share; waits (at most 5 s) until the middlebox has handed it
    /// to the enclave.
    pub fn send(&self, client_random: [u8; 32], master: &[u8]) {
        let Ok(share) = seal_share(&self.engine, client_random, master) else {
            return;
        };
        let (ack_tx, ack_rx) = sync_channel(1);
        if self.tx.send((share, ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(Duration::from_secs(5));
        }
    }

    /// A key-log function that sends every share (the normal endpoint).
    pub fn share_fn(&self) -> Arc<ShareFn> {
        let me = self.clone();
        Arc::new(move |cr, secret| me.send(cr, secret))
    }
}
