//! A stand-in for Upstash's REST API in front of a real `redis-server` — tooling for tests and
//! the bench, not product. It speaks exactly the subset `crates/spin-edge/src/rest.rs` relies on:
//! `POST /` with a JSON array (one command), `Authorization: Bearer <token>`,
//! `Upstash-Encoding: base64`; `200 {"result": …}`, `400 {"error": "…"}` when Redis refuses,
//! `401` for a bad token. HTTPS with a [`TestCa`] certificate for `localhost` (or plain HTTP,
//! for the benchmark's row), HTTP/1.1 keep-alive; it counts the TCP connections it accepts, so
//! a test can see the pooling.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::tls::TestCa;

/// A running facade.
pub struct RestFacade {
    /// Its address on 127.0.0.1.
    pub addr: SocketAddr,
    /// The bearer token it accepts.
    pub token: String,
    /// `https` or `http`.
    scheme: &'static str,
    accepted: Arc<AtomicU64>,
    server: tokio::task::JoinHandle<()>,
}

impl RestFacade {
    /// Serves the Redis at `redis_url` over HTTPS with a certificate from `ca`, accepting
    /// `token`.
    pub async fn start(redis_url: &str, ca: &TestCa, token: &str) -> Result<Self> {
        Self::serve(redis_url, Some(ca), token).await
    }

    /// The same over plain HTTP (the benchmark's plain row; product manifests allow only
    /// `https://` to a Redis host).
    pub async fn start_plain(redis_url: &str, token: &str) -> Result<Self> {
        Self::serve(redis_url, None, token).await
    }

    async fn serve(redis_url: &str, ca: Option<&TestCa>, token: &str) -> Result<Self> {
        let tls = ca.map(server_config).transpose()?.map(Arc::new);
        // Reconnects by itself: the tests restart Redis under the facade.
        let redis = redis::aio::ConnectionManager::new(redis::Client::open(redis_url)?).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicU64::new(0));
        let token = token.to_owned();
        let server = tokio::spawn({
            let (accepted, token) = (accepted.clone(), token.clone());
            async move {
                let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
                while let Ok((tcp, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    let _ = tcp.set_nodelay(true);
                    let (acceptor, redis, token) = (acceptor.clone(), redis.clone(), token.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            answer(req, redis.clone(), token.clone())
                        });
                        let http = hyper::server::conn::http1::Builder::new();
                        let _ = match acceptor {
                            Some(acceptor) => match acceptor.accept(tcp).await {
                                Ok(stream) => {
                                    http.serve_connection(TokioIo::new(stream), service).await
                                }
                                Err(_) => return,
                            },
                            None => http.serve_connection(TokioIo::new(tcp), service).await,
                        };
                    });
                }
            }
        });
        Ok(RestFacade {
            addr,
            token,
            scheme: if ca.is_some() { "https" } else { "http" },
            accepted,
            server,
        })
    }

    /// The `redis_url` of this facade: `https://<token>@localhost:<port>`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}@localhost:{}",
            self.scheme,
            self.token,
            self.addr.port()
        )
    }

    /// Its `host:port`.
    pub fn host(&self) -> String {
        format!("localhost:{}", self.addr.port())
    }

    /// The `redis_origin` that `allowed_outbound_hosts` needs for it: `https://localhost:PORT`
    /// (`http://` for a plain facade).
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.host())
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for RestFacade {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The TLS server configuration: the CA's `localhost` certificate.
fn server_config(ca: &TestCa) -> Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(ca.path("server.pem"))?
        .collect::<Result<Vec<_>, _>>()
        .context("server.pem")?;
    let key = PrivateKeyDer::from_pem_file(ca.path("server.key")).context("server.key")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?)
}

/// One request: check the token, run the command, render as Upstash does.
async fn answer(
    req: Request<Incoming>,
    mut redis: redis::aio::ConnectionManager,
    token: String,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: Value| {
        Ok(Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a valid response"))
    };
    let authorized = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {token}"));
    if !authorized {
        return reply(StatusCode::UNAUTHORIZED, json!({ "error": "Unauthorized" }));
    }
    if req.method() != hyper::Method::POST || req.uri().path() != "/" {
        return reply(
            StatusCode::NOT_FOUND,
            json!({ "error": "not in this facade" }),
        );
    }
    let Ok(body) = req.into_body().collect().await else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({ "error": "unreadable body" }),
        );
    };
    let Ok(words) = serde_json::from_slice::<Vec<String>>(&body.to_bytes()) else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({ "error": "ERR not a command" }),
        );
    };
    let Some((name, args)) = words.split_first() else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({ "error": "ERR empty command" }),
        );
    };
    let mut cmd = redis::cmd(name);
    for arg in args {
        cmd.arg(arg.as_bytes());
    }
    match cmd.query_async::<redis::Value>(&mut redis).await {
        Ok(value) => reply(StatusCode::OK, json!({ "result": encode(&value) })),
        Err(e) => {
            let text = match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                _ => e.to_string(),
            };
            let status = if e.is_io_error() {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::BAD_REQUEST
            };
            reply(status, json!({ "error": text }))
        }
    }
}

/// A Redis reply in Upstash's JSON with `Upstash-Encoding: base64`.
fn encode(value: &redis::Value) -> Value {
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    match value {
        redis::Value::Nil => Value::Null,
        redis::Value::Int(i) => json!(i),
        redis::Value::BulkString(b) => b64(b),
        redis::Value::SimpleString(s) => b64(s.as_bytes()),
        redis::Value::Okay => b64(b"OK"),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            Value::Array(items.iter().map(encode).collect())
        }
        other => Value::String(format!("{other:?}")),
    }
}
