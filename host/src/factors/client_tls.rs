//! `[[client_tls]]` of Spin's runtime configuration: for a component and a host, the roots (and
//! the client certificate) outbound HTTPS trusts instead of the default, as Spin 3.6.3 reads
//! them (`crates/factor-outbound-networking/src/runtime_config/spin.rs`, `load_tls_config`:
//! `component_ids` and `hosts` not empty, a host a name without a port, `ca_use_webpki_roots`
//! true unless `ca_roots_file` is given, a client certificate only with its key, paths relative
//! to the runtime configuration's directory) and applies them
//! (`crates/factor-outbound-networking/src/tls.rs`: the first (component, host) pair given
//! wins; any other request keeps the default).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail, ensure};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use serde::Deserialize;

/// The TLS configurations by component and host; empty: every request keeps the default.
#[derive(Clone, Default)]
pub struct ClientTls {
    /// Each distinct configuration, once.
    configs: Vec<Arc<ClientConfig>>,
    /// (component id, host) → its index in `configs`.
    by_component_host: Arc<HashMap<(String, String), usize>>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("pairs", &self.by_component_host.len())
            .finish()
    }
}

/// One `[[client_tls]]` entry, with Spin's keys (any other is refused).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    component_ids: Vec<String>,
    hosts: Vec<String>,
    ca_use_webpki_roots: Option<bool>,
    ca_roots_file: Option<String>,
    client_cert_file: Option<String>,
    client_private_key_file: Option<String>,
}

impl ClientTls {
    /// The `[[client_tls]]` entries of a runtime configuration in `dir`, if it has any.
    pub fn from_runtime_config(table: &toml::Table, dir: &Path) -> Result<Option<Self>> {
        let Some(value) = table.get("client_tls") else {
            return Ok(None);
        };
        let entries: Vec<Entry> = value
            .clone()
            .try_into()
            .context("[[client_tls]] is not a list of Spin's client TLS entries")?;
        let mut tls = ClientTls::default();
        let mut pairs = HashMap::new();
        for entry in entries {
            ensure!(
                !entry.component_ids.is_empty(),
                "[[client_tls]]: 'component_ids' list may not be empty"
            );
            ensure!(
                !entry.hosts.is_empty(),
                "[[client_tls]]: 'hosts' list may not be empty"
            );
            for host in &entry.hosts {
                let authority: http::uri::Authority = host
                    .parse()
                    .with_context(|| format!("[[client_tls]]: invalid host {host:?}"))?;
                ensure!(
                    authority.port().is_none(),
                    "[[client_tls]]: invalid host {host:?}; ports not currently supported"
                );
            }
            let index = tls.configs.len();
            tls.configs.push(Arc::new(entry.client_config(dir)?));
            for component in &entry.component_ids {
                for host in &entry.hosts {
                    pairs
                        .entry((component.clone(), host.clone()))
                        .or_insert(index);
                }
            }
        }
        tls.by_component_host = Arc::new(pairs);
        Ok(Some(tls))
    }

    /// Every configuration, in the order given (what [`Self::index`] points into).
    pub fn configs(&self) -> &[Arc<ClientConfig>] {
        &self.configs
    }

    /// The configuration `component` uses for `host`, if one is given.
    pub fn index(&self, component: &str, host: &str) -> Option<usize> {
        if self.by_component_host.is_empty() {
            return None;
        }
        self.by_component_host
            .get(&(component.to_owned(), host.to_owned()))
            .copied()
    }
}

impl Entry {
    fn client_config(&self, dir: &Path) -> Result<ClientConfig> {
        let mut roots = RootCertStore::empty();
        if self
            .ca_use_webpki_roots
            .unwrap_or(self.ca_roots_file.is_none())
        {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        if let Some(file) = &self.ca_roots_file {
            for cert in certs(&dir.join(file))? {
                roots
                    .add(cert)
                    .with_context(|| format!("{file}: not a CA certificate"))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_root_certificates(roots);
        Ok(
            match (&self.client_cert_file, &self.client_private_key_file) {
                (Some(cert), Some(key)) => {
                    let key =
                        std::fs::read(dir.join(key)).with_context(|| format!("reading {key}"))?;
                    let key = PrivateKeyDer::from_pem_slice(&key)
                        .map_err(|e| anyhow::anyhow!("client_private_key_file: {e}"))?;
                    builder.with_client_auth_cert(certs(&dir.join(cert))?, key)?
                }
                (None, None) => builder.with_no_client_auth(),
                (Some(_), None) => {
                    bail!("client_cert_file specified without client_private_key_file")
                }
                (None, Some(_)) => {
                    bail!("client_private_key_file specified without client_cert_file")
                }
            },
        )
    }
}

/// The certificates of the PEM file at `path`.
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: not a PEM certificate bundle", path.display()))?;
    ensure!(
        !certs.is_empty(),
        "{}: no certificate in it",
        path.display()
    );
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml: &str) -> Result<ClientTls> {
        let dir = tempfile::tempdir()?;
        let ca = rcgen_ca();
        std::fs::write(dir.path().join("ca.pem"), ca)?;
        Ok(ClientTls::from_runtime_config(&toml.parse()?, dir.path())?.expect("a table"))
    }

    fn rcgen_ca() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn the_first_component_and_host_pair_given_wins() {
        let tls = parse(
            r#"
            [[client_tls]]
            component_ids = ["deliver-events"]
            hosts = ["shop.example.com"]
            ca_roots_file = "ca.pem"
            [[client_tls]]
            component_ids = ["deliver-events", "pay"]
            hosts = ["shop.example.com", "api.example.com"]
            "#,
        )
        .unwrap();
        assert_eq!(tls.configs().len(), 2);
        assert_eq!(tls.index("deliver-events", "shop.example.com"), Some(0));
        assert_eq!(tls.index("pay", "shop.example.com"), Some(1));
        assert_eq!(tls.index("deliver-events", "api.example.com"), Some(1));
        assert_eq!(tls.index("web", "shop.example.com"), None);
        assert_eq!(tls.index("pay", "other.example.com"), None);
    }

    #[test]
    fn what_spin_refuses_is_refused() {
        for bad in [
            "[[client_tls]]\ncomponent_ids = []\nhosts = [\"a.example\"]",
            "[[client_tls]]\ncomponent_ids = [\"c\"]\nhosts = []",
            "[[client_tls]]\ncomponent_ids = [\"c\"]\nhosts = [\"a.example:443\"]",
            "[[client_tls]]\ncomponent_ids = [\"c\"]\nhosts = [\"a.example\"]\nclient_cert_file = \"ca.pem\"",
            "[[client_tls]]\ncomponent_ids = [\"c\"]\nhosts = [\"a.example\"]\nca_roots_file = \"missing.pem\"",
            "[[client_tls]]\ncomponent_ids = [\"c\"]\nhosts = [\"a.example\"]\ncolour = \"red\"",
        ] {
            assert!(parse(bad).is_err(), "accepted: {bad}");
        }
    }
}
