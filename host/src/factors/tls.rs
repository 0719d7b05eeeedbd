//! The trust behind the host's outbound TLS to Redis and Postgres, as Spin's: the system's root
//! certificates, plus one CA bundle the operator may add (`--tls-ca`, e.g. Amazon's RDS bundle
//! or a test CA).
//!
//! What Spin v3.6.3 does, and so what we do:
//! - Redis (`crates/factor-outbound-redis`): `rediss://` through redis-rs, the system's roots,
//!   certificate and host name checked (`rediss://…#insecure` skips the checks, redis-rs's own
//!   rule).
//! - Postgres (`crates/factor-outbound-pg/src/client.rs`, `create_connection_pool`): `NoTls`
//!   when `sslmode=disable`, otherwise a TLS connector that verifies the chain and the host
//!   name. So `sslmode=require` verifies fully (libpq's `verify-full`); `prefer` (the default)
//!   uses TLS when the server offers it; `verify-ca`/`verify-full` are not accepted by
//!   tokio-postgres's connection-string parser, in Spin as here.
//!
//! Spin 3.x takes no extra CA (Spin 4's `set-ca-root` is beyond spin-sdk 5.2): on real Spin the
//! CA must be in the machine's trust store. `--tls-ca` is the local host's way to the same end.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use base64::Engine as _;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use rustls::{ClientConfig, RootCertStore};

/// The roots outbound TLS trusts.
#[derive(Clone)]
pub struct TlsTrust {
    /// The system's roots and the extra CA, for Postgres.
    roots: Arc<RootCertStore>,
    /// The same roots as one PEM bundle for redis-rs. Given none, redis-rs would read the
    /// system's store again for every connection (milliseconds of parsing that Spin's
    /// native-tls does not pay); given these, it never falls back to its bundled roots.
    redis_bundle: Vec<u8>,
}

impl std::fmt::Debug for TlsTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTrust")
            .field("roots", &self.roots.len())
            .field("bundle_bytes", &self.redis_bundle.len())
            .finish()
    }
}

impl Default for TlsTrust {
    fn default() -> Self {
        Self::system()
    }
}

impl TlsTrust {
    /// The system's roots (those it cannot parse are skipped, as rustls-native-certs reports).
    pub fn system() -> Self {
        let mut roots = RootCertStore::empty();
        let loaded = rustls_native_certs::load_native_certs();
        for error in &loaded.errors {
            tracing::warn!("loading the system's root certificates: {error}");
        }
        let redis_bundle = loaded.certs.iter().flat_map(pem_encode).collect();
        let (added, ignored) = roots.add_parsable_certificates(loaded.certs);
        tracing::debug!("trusting {added} system root certificates ({ignored} unparsable)");
        TlsTrust {
            roots: Arc::new(roots),
            redis_bundle,
        }
    }

    /// The system's roots plus every certificate of the PEM file at `path`.
    pub fn with_extra_ca(path: &Path) -> Result<Self> {
        let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let extra = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{}: not a PEM certificate bundle", path.display()))?;
        anyhow::ensure!(
            !extra.is_empty(),
            "{}: no certificate in it",
            path.display()
        );
        let mut trust = Self::system();
        let roots = Arc::make_mut(&mut trust.roots);
        for cert in extra {
            roots
                .add(cert)
                .with_context(|| format!("{}: not a usable CA certificate", path.display()))?;
        }
        trust.redis_bundle.extend_from_slice(&pem);
        trust.redis_bundle.push(b'\n');
        Ok(trust)
    }

    /// A rustls client configuration that verifies against these roots (for Postgres).
    pub fn client_config(&self) -> Arc<ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(self.roots.clone())
            .with_no_client_auth();
        Arc::new(config)
    }

    /// A Redis client for `address`, trusting these roots for `rediss://`.
    pub fn redis_client(&self, address: &str) -> redis::RedisResult<redis::Client> {
        if address.starts_with("rediss://") {
            redis::Client::build_with_tls(
                address,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(self.redis_bundle.clone()),
                },
            )
        } else {
            redis::Client::open(address)
        }
    }
}

/// One certificate as PEM.
fn pem_encode(der: &CertificateDer<'_>) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let mut pem = b"-----BEGIN CERTIFICATE-----\n".to_vec();
    for line in b64.as_bytes().chunks(64) {
        pem.extend_from_slice(line);
        pem.push(b'\n');
    }
    pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
    pem
}
