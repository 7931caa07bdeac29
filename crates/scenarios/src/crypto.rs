//! Scenario `crypto`: the baseline costs of the primitives the other scenarios are built from,
//! measured natively through aws-lc-rs. A transaction pipeline that spends 2.3 ms in RSA
//! decryption is only understood next to what RSA decryption costs alone.

use aws_lc_rs::aead::{AES_128_GCM, AES_256_GCM, Aad, Algorithm, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::agreement::{self, X25519};
use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use aws_lc_rs::rsa::{
    KeySize, OAEP_SHA256_MGF1SHA256, OaepPrivateDecryptingKey, OaepPublicEncryptingKey,
    PrivateDecryptingKey,
};
use aws_lc_rs::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use measure::params;
use measure::sampler::try_sample;

use harness::{At, Context, Scenario, ScenarioError};

/// Message sizes for the AEADs and SHA-256, in bytes.
pub const SIZES: &[usize] = &[256, 1024, 4096, 16384];

const NAME: &str = "crypto";
const BACKEND: &str = "native";

/// The `crypto` scenario.
pub struct Crypto;

fn aead_key(alg: &'static Algorithm, rng: &SystemRandom) -> Result<LessSafeKey, ScenarioError> {
    let mut key = vec![0u8; alg.key_len()];
    rng.fill(&mut key).at("aead key")?;
    let key = UnboundKey::new(alg, &key).at("aead key")?;
    Ok(LessSafeKey::new(key))
}

impl Crypto {
    fn aead(
        &self,
        ctx: &Context<'_>,
        label: &str,
        alg: &'static Algorithm,
    ) -> Result<(), ScenarioError> {
        let rng = SystemRandom::new();
        let key = aead_key(alg, &rng)?;
        let cfg = ctx.options.sampler();
        for &size in SIZES {
            ctx.check_cancel()?;
            let p = || params! {"algorithm" => label, "size_bytes" => size};
            // A fixed nonce is fine for timing (the key is random and never used for secrecy).
            let nonce = [7u8; 12];
            let mut buf = vec![0xa5u8; size];
            let seal = try_sample(&cfg, || {
                key.seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::empty(),
                    &mut buf,
                )
            })
            .at("seal")?;
            ctx.emit_samples(NAME, BACKEND, p(), "seal", seal, Some(size as u64))?;
            ctx.progress().advance(1);

            let mut sealed = vec![0x5au8; size];
            let tag = key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::empty(),
                    &mut sealed,
                )
                .at("seal")?;
            sealed.extend_from_slice(tag.as_ref());
            let mut work = sealed.clone();
            let open = try_sample(&cfg, || {
                // Opening decrypts in place, so every iteration starts from the sealed copy;
                // the copy is part of the measured cost, as it would be in a real receiver.
                work.copy_from_slice(&sealed);
                key.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut work)
                    .map(|plain| plain.len())
            })
            .at("open")?;
            ctx.emit_samples(NAME, BACKEND, p(), "open", open, Some(size as u64))?;
            ctx.progress().advance(1);
        }
        Ok(())
    }

    fn sha256(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let cfg = ctx.options.sampler();
        for &size in SIZES {
            ctx.check_cancel()?;
            let data = vec![0x61u8; size];
            let s = measure::sampler::sample(&cfg, || digest(&SHA256, &data));
            let p = params! {"algorithm" => "sha-256", "size_bytes" => size};
            ctx.emit_samples(NAME, BACKEND, p, "digest", s, Some(size as u64))?;
            ctx.progress().advance(1);
        }
        Ok(())
    }

    fn rsa(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        ctx.check_cancel()?;
        let key = PrivateDecryptingKey::generate(KeySize::Rsa3072).at("rsa keygen")?;
        let public = OaepPublicEncryptingKey::new(key.public_key()).at("rsa key")?;
        let private = OaepPrivateDecryptingKey::new(key).at("rsa key")?;
        let plaintext = [0x42u8; 64];
        let mut ct = vec![0u8; public.ciphertext_size()];
        let ct = public
            .encrypt(&OAEP_SHA256_MGF1SHA256, &plaintext, &mut ct, None)
            .at("rsa encrypt")?
            .to_vec();
        let mut out = vec![0u8; private.min_output_size()];
        let s = try_sample(&ctx.options.sampler(), || {
            private
                .decrypt(&OAEP_SHA256_MGF1SHA256, &ct, &mut out, None)
                .map(|p| p.len())
        })
        .at("rsa decrypt")?;
        let p = params! {"algorithm" => "rsa-3072-oaep-sha256", "size_bytes" => plaintext.len()};
        ctx.emit_samples(NAME, BACKEND, p, "decrypt", s, None)?;
        ctx.progress().advance(1);
        Ok(())
    }

    fn ed25519(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        ctx.check_cancel()?;
        let cfg = ctx.options.sampler();
        let pair = Ed25519KeyPair::generate().at("ed25519 keygen")?;
        let msg = [0x33u8; 64];
        let sign = measure::sampler::sample(&cfg, || pair.sign(&msg));
        let p = || params! {"algorithm" => "ed25519", "size_bytes" => msg.len()};
        ctx.emit_samples(NAME, BACKEND, p(), "sign", sign, None)?;
        ctx.progress().advance(1);
        let sig = pair.sign(&msg);
        let public = UnparsedPublicKey::new(&ED25519, pair.public_key().as_ref().to_vec());
        let verify = try_sample(&cfg, || public.verify(&msg, sig.as_ref())).at("ed25519 verify")?;
        ctx.emit_samples(NAME, BACKEND, p(), "verify", verify, None)?;
        ctx.progress().advance(1);
        Ok(())
    }

    fn x25519(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        ctx.check_cancel()?;
        let ours = agreement::PrivateKey::generate(&X25519).at("x25519 keygen")?;
        let theirs = agreement::PrivateKey::generate(&X25519).at("x25519 keygen")?;
        let peer = theirs.compute_public_key().at("x25519 public key")?;
        let peer = agreement::UnparsedPublicKey::new(&X25519, peer.as_ref().to_vec());
        let s = try_sample(&ctx.options.sampler(), || {
            agreement::agree(&ours, &peer, aws_lc_rs::error::Unspecified, |k| Ok(k[0]))
        })
        .at("x25519 agree")?;
        let p = params! {"algorithm" => "x25519"};
        ctx.emit_samples(NAME, BACKEND, p, "agree", s, None)?;
        ctx.progress().advance(1);
        Ok(())
    }
}

impl Scenario for Crypto {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "baseline costs of AES-GCM, SHA-256, RSA-3072 OAEP, Ed25519 and X25519 (aws-lc-rs)"
    }

    fn run(&self, ctx: &Context<'_>) -> Result<(), ScenarioError> {
        let steps = (SIZES.len() * 2 * 2 + SIZES.len() + 4) as u64;
        ctx.progress().begin("crypto", steps);
        self.aead(ctx, "aes-128-gcm", &AES_128_GCM)?;
        self.aead(ctx, "aes-256-gcm", &AES_256_GCM)?;
        self.sha256(ctx)?;
        self.rsa(ctx)?;
        self.ed25519(ctx)?;
        self.x25519(ctx)
    }
}
