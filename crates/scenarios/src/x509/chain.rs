//! The workload: certificate chains (root, intermediate, leaf; RSA-2048 or ECDSA P-256)
//! generated with `rcgen`, kept in the run's folder, and one verification of a chain with
//! `rustls-webpki` at a fixed time.

use std::path::{Path, PathBuf};

use aws_lc_rs::digest::{SHA256, digest};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, RsaKeySize, SignatureAlgorithm,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm, UnixTime};
use webpki::{EndEntityCert, KeyUsage, anchor_from_trusted_cert};

use harness::At;
use harness::ScenarioError;
use harness::codec::Encode;
use harness::hex::hex;

/// The fixed verification time: 2025-06-01T00:00:00Z, inside every valid chain's validity.
pub const VERIFY_AT: u64 = 1_748_736_000;

/// Signature algorithms the verifier accepts (the two the chains use).
pub(super) static ALGS: &[&dyn SignatureVerificationAlgorithm] = &[
    webpki::aws_lc_rs::ECDSA_P256_SHA256,
    webpki::aws_lc_rs::RSA_PKCS1_2048_8192_SHA256,
];

/// Why the service refused a chain or a call. Crosses the boundary as its message.
#[derive(Debug, thiserror::Error)]
pub enum X509Error {
    /// The PEM chain did not decode.
    #[error("parsing the chain's PEM: {0}")]
    Pem(String),
    /// The chain holds no certificate.
    #[error("the chain holds no certificate")]
    Empty,
    /// A certificate did not parse (`which`: leaf or root).
    #[error("parsing the {which} certificate: {source}")]
    Parse {
        /// Which certificate.
        which: &'static str,
        /// webpki's reason.
        source: webpki::Error,
    },
    /// The chain did not verify.
    #[error("the chain did not verify: {0}")]
    Verify(webpki::Error),
    /// The bounded heap could not serve the work: the requests were served outside the
    /// budget (see [`enclave::alloc`]), which a real enclave would not have survived.
    #[error(
        "heap exhausted: {events} allocation(s) did not fit the enclave's {capacity}-byte heap"
    )]
    HeapExhausted {
        /// The heap's capacity in bytes.
        capacity: usize,
        /// Requests that did not fit since the call began.
        events: u64,
    },
    /// No chain was loaded before verifying.
    #[error("no chain loaded")]
    NotLoaded,
    /// A malformed ecall input.
    #[error("malformed input: {0}")]
    Input(&'static str),
}

/// The key type of a chain (every certificate in it uses the same kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA-2048, PKCS#1 v1.5 signatures with SHA-256.
    Rsa2048,
    /// ECDSA over P-256 with SHA-256.
    EcdsaP256,
}

impl KeyKind {
    /// Both kinds, in run order.
    pub const ALL: [KeyKind; 2] = [KeyKind::Rsa2048, KeyKind::EcdsaP256];

    /// The name in records and file names.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Rsa2048 => "rsa-2048",
            KeyKind::EcdsaP256 => "ecdsa-p256",
        }
    }

    fn alg(self) -> &'static SignatureAlgorithm {
        match self {
            KeyKind::Rsa2048 => &rcgen::PKCS_RSA_SHA256,
            KeyKind::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        }
    }

    fn key(self) -> Result<KeyPair, rcgen::Error> {
        match self {
            KeyKind::Rsa2048 => KeyPair::generate_rsa_for(self.alg(), RsaKeySize::_2048),
            KeyKind::EcdsaP256 => KeyPair::generate_for(self.alg()),
        }
    }
}

/// The leaf's validity period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafValidity {
    /// 2024-01-01 to 2030-01-01: valid at [`VERIFY_AT`].
    Current,
    /// 2020-01-01 to 2021-01-01: expired at [`VERIFY_AT`].
    Expired,
}

/// A certificate chain: root, intermediate, leaf, all DER.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The key type.
    pub key: KeyKind,
    /// The self-signed root (the trust anchor).
    pub root: Vec<u8>,
    /// The intermediate CA, signed by the root.
    pub intermediate: Vec<u8>,
    /// The server certificate, signed by the intermediate.
    pub leaf: Vec<u8>,
}

impl Chain {
    /// Generates a fresh chain (new keys each time; the keys are dropped, only the
    /// certificates are kept).
    pub fn generate(key: KeyKind, leaf: LeafValidity) -> Result<Chain, ScenarioError> {
        let name = key.name();
        let ca = |cn: String, constraint: BasicConstraints| {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.distinguished_name
                .push(DnType::OrganizationName, "ccbench");
            p.is_ca = IsCa::Ca(constraint);
            p.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2040, 1, 1);
            p
        };
        let root_key = key.key().at("generating the chain")?;
        let root_params = ca(
            format!("ccbench x509 root ({name})"),
            BasicConstraints::Unconstrained,
        );
        let root = root_params
            .self_signed(&root_key)
            .at("generating the chain")?;
        let root_issuer = Issuer::new(root_params, &root_key);

        let int_key = key.key().at("generating the chain")?;
        let int_params = ca(
            format!("ccbench x509 intermediate ({name})"),
            BasicConstraints::Constrained(0),
        );
        let intermediate = int_params
            .signed_by(&int_key, &root_issuer)
            .at("generating the chain")?;
        let int_issuer = Issuer::new(int_params, &int_key);

        let leaf_key = key.key().at("generating the chain")?;
        let mut p = CertificateParams::new(vec!["bench.ccbench.test".to_owned()])
            .at("generating the chain")?;
        p.distinguished_name
            .push(DnType::CommonName, "bench.ccbench.test");
        p.is_ca = IsCa::ExplicitNoCa;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let (from, to) = match leaf {
            LeafValidity::Current => ((2024, 1, 1), (2030, 1, 1)),
            LeafValidity::Expired => ((2020, 1, 1), (2021, 1, 1)),
        };
        p.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        p.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
        let leaf = p
            .signed_by(&leaf_key, &int_issuer)
            .at("generating the chain")?;
        Ok(Chain {
            key,
            root: root.der().to_vec(),
            intermediate: intermediate.der().to_vec(),
            leaf: leaf.der().to_vec(),
        })
    }

    /// The chain as the service parses it: leaf, then intermediate, PEM.
    pub fn chain_pem(&self) -> String {
        let mut s = pem::encode(&pem::Pem::new("CERTIFICATE", self.leaf.clone()));
        s.push_str(&pem::encode(&pem::Pem::new(
            "CERTIFICATE",
            self.intermediate.clone(),
        )));
        s
    }

    /// SHA-256 over the leaf, intermediate and root DER, in that order, as hex: names the
    /// chain in records.
    pub fn fingerprint(&self) -> String {
        let mut all = self.leaf.clone();
        all.extend_from_slice(&self.intermediate);
        all.extend_from_slice(&self.root);
        hex(digest(&SHA256, &all).as_ref())
    }

    /// The [`super::Call::Load`] input.
    pub fn load_input(&self) -> Vec<u8> {
        super::LoadRequest {
            root: self.root.clone(),
            chain_pem: self.chain_pem().into_bytes(),
        }
        .encode()
    }

    /// The same chain with one bit of the leaf's signature flipped (its last byte).
    pub fn with_flipped_signature(&self) -> Chain {
        let mut c = self.clone();
        if let Some(b) = c.leaf.last_mut() {
            *b ^= 0x01;
        }
        c
    }

    /// Writes `root`, `intermediate` and `leaf` as `.der` and `.pem`, and `chain.pem`
    /// (leaf, intermediate) into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), ScenarioError> {
        let fail = |e: std::io::Error| {
            ScenarioError::step(format!("writing the chain to {}", dir.display()), e)
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        for (name, der) in [
            ("root", &self.root),
            ("intermediate", &self.intermediate),
            ("leaf", &self.leaf),
        ] {
            std::fs::write(dir.join(format!("{name}.der")), der).map_err(fail)?;
            let pem = pem::encode(&pem::Pem::new("CERTIFICATE", der.clone()));
            std::fs::write(dir.join(format!("{name}.pem")), pem).map_err(fail)?;
        }
        std::fs::write(dir.join("chain.pem"), self.chain_pem()).map_err(fail)
    }

    /// Reads a chain [`Chain::write`] wrote; `Ok(None)` when `dir` holds none.
    pub fn read(key: KeyKind, dir: &Path) -> Result<Option<Chain>, ScenarioError> {
        let names = ["root.der", "intermediate.der", "leaf.der"];
        if !names.iter().all(|n| dir.join(n).is_file()) {
            return Ok(None);
        }
        let mut der = Vec::new();
        for n in names {
            let path = dir.join(n);
            der.push(
                std::fs::read(&path)
                    .map_err(|e| ScenarioError::step(format!("reading {}", path.display()), e))?,
            );
        }
        let [root, intermediate, leaf] = <[Vec<u8>; 3]>::try_from(der)
            .map_err(|_| ScenarioError::step("reading the chain", "three certificates"))?;
        Ok(Some(Chain {
            key,
            root,
            intermediate,
            leaf,
        }))
    }
}

/// Parses the chain from PEM and verifies it against the root: the unit of work.
pub(super) fn verify_once(
    root: &CertificateDer<'_>,
    chain_pem: &[u8],
    at: UnixTime,
) -> Result<(), X509Error> {
    let anchor = anchor_from_trusted_cert(root).map_err(|source| X509Error::Parse {
        which: "root",
        source,
    })?;
    let certs = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| X509Error::Pem(e.to_string()))?;
    let (leaf, intermediates) = certs.split_first().ok_or(X509Error::Empty)?;
    let ee = EndEntityCert::try_from(leaf).map_err(|source| X509Error::Parse {
        which: "leaf",
        source,
    })?;
    ee.verify_for_usage(
        ALGS,
        &[anchor],
        intermediates,
        at,
        KeyUsage::server_auth(),
        None,
        None,
    )
    .map_err(X509Error::Verify)?;
    Ok(())
}

/// Where the chain of `key` lives in a run's folder.
pub fn chain_dir(out_dir: &Path, key: KeyKind) -> PathBuf {
    out_dir.join("x509").join(key.name())
}
