//! The admin API over HTTP: bearer token, JSON in and out, failures sorted by exit code.

use std::fmt;
use std::time::Duration;

use reqwest::blocking::Client;
use serde_json::Value;

/// Why a call failed.
#[derive(Debug)]
pub enum Failure {
    /// The server answered with an error.
    Api {
        /// HTTP status.
        status: u16,
        /// The stable error code (`http_<status>` when the body has none, e.g. Spin's empty 404).
        code: String,
        /// For humans.
        message: String,
    },
    /// No answer: connection refused, timed out, DNS, TLS.
    Transport(String),
    /// An answer this tool does not understand.
    Unexpected(String),
    /// The command line asks for nothing that can be sent.
    Usage(String),
}

impl Failure {
    /// The stable code, for `--json`.
    pub fn code(&self) -> &str {
        match self {
            Failure::Api { code, .. } => code,
            Failure::Transport(_) => "unreachable",
            Failure::Unexpected(_) => "unexpected",
            Failure::Usage(_) => "usage",
        }
    }

    /// The process exit code (see `--help`).
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Api {
                status: 401 | 403, ..
            } => 3,
            Failure::Api { status: 404, .. } => 4,
            Failure::Api {
                status: 502..=504, ..
            }
            | Failure::Transport(_) => 6,
            Failure::Api {
                status: 400..=499, ..
            } => 5,
            Failure::Api { .. } | Failure::Unexpected(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Api {
                status,
                code,
                message,
            } => write!(f, "{code} ({status}): {message}"),
            Failure::Transport(e) => write!(f, "cannot reach the server: {e}"),
            Failure::Unexpected(e) => write!(f, "unexpected answer: {e}"),
            Failure::Usage(e) => write!(f, "{e}"),
        }
    }
}

/// A client of one deployment's admin API.
pub struct Api {
    http: Client,
    base: String,
    token: String,
    timeout: Duration,
}

impl Api {
    /// A client of `base` (e.g. `https://shop.example`) with the admin `token`.
    pub fn new(base: &str, token: &str, timeout: Duration) -> Result<Self, Failure> {
        let http = Client::builder()
            .user_agent(concat!("seckill-admin/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Failure::Unexpected(e.to_string()))?;
        Ok(Api {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            timeout,
        })
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Value, Failure> {
        self.send("GET", path, None)
    }

    /// `method path` with an optional JSON body.
    pub fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Failure> {
        self.request(method, path, body, self.timeout)
    }

    /// Like [`Api::send`], allowing `extra` time on top of the timeout (a job run `--for` long).
    pub fn send_long(&self, method: &str, path: &str, extra: Duration) -> Result<Value, Failure> {
        self.request(method, path, None, self.timeout + extra)
    }

    /// The server's clock (`GET /api/time`), which event times are reckoned in.
    pub fn server_now_ms(&self) -> Result<u64, Failure> {
        self.get("/api/time")?["now_ms"]
            .as_u64()
            .ok_or_else(|| Failure::Unexpected("/api/time has no now_ms".into()))
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, Failure> {
        let verb = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| Failure::Unexpected(e.to_string()))?;
        let mut req = self
            .http
            .request(verb, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .timeout(timeout);
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req
            .send()
            .map_err(|e| Failure::Transport(source_chain(&e)))?;
        let status = resp.status().as_u16();
        if resp.headers().contains_key("seckill-audit") {
            eprintln!(
                "warning: {method} {path} was answered {status}, but its audit record could not be \
                 stored (it is in the server's log)"
            );
        }
        let bytes = resp
            .bytes()
            .map_err(|e| Failure::Transport(source_chain(&e)))?;
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if (200..300).contains(&status) {
            return json.ok_or_else(|| {
                Failure::Unexpected(format!("{path} answered {status} without JSON"))
            });
        }
        let error = json.as_ref().map(|j| &j["error"]);
        let text = |k: &str| error.and_then(|e| e[k].as_str()).map(str::to_owned);
        Err(Failure::Api {
            status,
            code: text("code").unwrap_or_else(|| format!("http_{status}")),
            message: text("message").unwrap_or_else(|| match status {
                404 => format!("no route {path} here: is --url the seckill deployment?"),
                _ => format!("HTTP {status} from {path}"),
            }),
        })
    }
}

/// An error with its causes (reqwest's own message alone says little: "error sending request").
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}
