//! The shop's endpoint for order events (`shop/receiver.py`): a Python process that verifies
//! every delivery with the Standard Webhooks reference library, controlled over HTTP.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::machine::repo_root;
use crate::tls::TestCa;

/// A delivery as the shop saw it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Received {
    /// `webhook-id`.
    pub id: Option<String>,
    /// The payload's `type`, once verified.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub order_id: Option<String>,
    /// Whether the reference library verified its signature.
    pub verified: bool,
    /// The status it was answered.
    pub answered: u16,
    /// Why it did not verify.
    pub error: Option<String>,
}

/// A running receiver; killed when dropped.
pub struct ShopReceiver {
    child: Child,
    base: String,
    /// Its HTTPS port for deliveries, when started with [`ShopReceiver::start_tls`].
    tls_port: Option<u16>,
    client: reqwest::Client,
    /// Its own runtime for the control calls (`None` once dropped): a caller on a
    /// multi-threaded runtime makes them inside `tokio::task::block_in_place`.
    rt: Option<tokio::runtime::Runtime>,
}

impl ShopReceiver {
    /// Starts one on a free loopback port. Needs `python3` with `standardwebhooks`
    /// (`scripts/setup.sh` installs it).
    pub fn start() -> Result<Self> {
        Self::launch(&[])
    }

    /// One that also takes deliveries over HTTPS on `address` with `ca`'s server certificate,
    /// as a shop's public endpoint does ([`Self::endpoint`]).
    pub fn start_tls(address: &str, ca: &TestCa) -> Result<Self> {
        Self::launch(&[
            "--tls",
            address,
            &ca.path("server.pem"),
            &ca.path("server.key"),
        ])
    }

    fn launch(args: &[&str]) -> Result<Self> {
        let script = repo_root().join("tools/testkit/shop/receiver.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("python3")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let ports: Option<Vec<u16>> = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|ports| ports.split(' ').map(|p| p.parse().ok()).collect());
        let Some(&[port, ref tls @ ..]) = ports.as_deref() else {
            let _ = child.kill();
            bail!("the shop's receiver did not start (is `standardwebhooks` installed?): {line:?}");
        };
        let (base, tls_port) = (format!("http://127.0.0.1:{port}"), tls.first().copied());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(ShopReceiver {
            child,
            base,
            tls_port,
            client: reqwest::Client::new(),
            rt: Some(rt),
        })
    }

    /// Its HTTPS endpoint under the name `host` (which its certificate names, and which
    /// resolves to its address): `https://<host>:<tls port><path>`.
    pub fn endpoint(&self, host: &str, path: &str) -> Result<String> {
        let port = self
            .tls_port
            .context("the receiver was started without TLS (start_tls)")?;
        Ok(format!("https://{host}:{port}{path}"))
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.rt.as_ref().expect("alive until dropped")
    }

    fn put(&self, path: &str, value: serde_json::Value) -> Result<()> {
        self.rt().block_on(async {
            self.client
                .put(format!("{}{path}", self.base))
                .json(&value)
                .send()
                .await?
                .error_for_status()?;
            Ok(())
        })
    }

    /// The secrets it holds: a delivery signed with any of them verifies.
    pub fn hold_secrets(&self, secrets: &[&str]) -> Result<()> {
        self.put("/secrets", serde_json::json!(secrets))
    }

    /// Answers the next `times` deliveries with `status`.
    pub fn answer_next(&self, status: u16, times: u32) -> Result<()> {
        self.put(
            "/behaviour",
            serde_json::json!({"status": status, "times": times}),
        )
    }

    /// Every delivery so far, in arrival order.
    pub fn received(&self) -> Result<Vec<Received>> {
        self.rt().block_on(async {
            Ok(self
                .client
                .get(format!("{}/received", self.base))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?)
        })
    }

    /// POSTs a delivery to it, as the network would bring one: the status it answered.
    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16> {
        self.rt().block_on(async {
            let mut req = self.client.post(format!("{}{path}", self.base));
            for (name, value) in headers {
                req = req.header(*name, *value);
            }
            Ok(req.body(body.to_vec()).send().await?.status().as_u16())
        })
    }
}

impl Drop for ShopReceiver {
    fn drop(&mut self) {
        // Not a blocking shutdown: the receiver may be dropped inside another runtime.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
