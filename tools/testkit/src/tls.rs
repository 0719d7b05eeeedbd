//! A certificate authority of the test's own, for the TLS servers and the REST facades.

use std::path::Path;

use anyhow::Result;

/// A certificate authority of the test's own and a server certificate it signed, for
/// `localhost` only (so `127.0.0.1` fails the host-name check) unless other names are given,
/// written as PEM files.
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// Makes `ca.pem`, `server.pem` and `server.key`, the server's for `localhost`.
    pub fn new() -> Result<Self> {
        Self::for_names(&["localhost"])
    }

    /// The same, the server's certificate for `names`.
    pub fn for_names(names: &[&str]) -> Result<Self> {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "seckill test CA");
        let ca_cert = ca.self_signed(&ca_key)?;
        let server_key = KeyPair::generate()?;
        let names = names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let server = CertificateParams::new(names)?.signed_by(&server_key, &ca_cert, &ca_key)?;
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem())?;
        std::fs::write(dir.path().join("server.pem"), server.pem())?;
        std::fs::write(dir.path().join("server.key"), server_key.serialize_pem())?;
        Ok(TestCa { dir })
    }

    /// The path of one of its files, as a string for command lines.
    pub fn path(&self, file: &str) -> String {
        self.dir.path().join(file).display().to_string()
    }

    /// The host's trust: the system's roots plus this CA, as `--tls-ca` gives it.
    pub fn trust(&self) -> Result<seckill_host::factors::tls::TlsTrust> {
        seckill_host::factors::tls::TlsTrust::with_extra_ca(Path::new(&self.path("ca.pem")))
    }
}
