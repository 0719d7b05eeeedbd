//! The native baseline: the same buy (the same domain code and Lua script, one EVALSHA) behind
//! a plain hyper server, no WebAssembly — so the suite shows what the per-request instance costs.
//! The suite runs it as a child process (`seckill-bench native-serve`) and measures its row here.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use seckill_domain::error::ErrorCode;
use seckill_domain::event::EventId;
use seckill_domain::nodes::Nodes;
use seckill_domain::{auth, clock, sale};
use seckill_native::NativeStore;
use seckill_spin_edge::error::ApiError;
use seckill_testkit::RedisServer;

use crate::measure::fresh_buy_row;
use crate::options::SuiteArgs;
use crate::server::{ServerProcess, local_addr};
use crate::table::Row;

/// The native baseline's row; `wasm_rps` is the host's pooled buy, which the note compares.
pub async fn row(redis: &RedisServer, wasm_rps: f64, args: &SuiteArgs) -> Result<Row> {
    let native = spawn(redis)?;
    let name = "native baseline: the same buy without WASM";
    let mut row = fresh_buy_row(name, native.addr, redis, "native", args).await?;
    row.add_note(&format!("WASM buy = {:.2}× native;", wasm_rps / row.rps()));
    Ok(row)
}

/// Starts the native server (`seckill-bench native-serve`) on `redis`.
fn spawn(redis: &RedisServer) -> Result<ServerProcess> {
    let addr = local_addr()?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args([
        "native-serve",
        "--listen",
        &addr.to_string(),
        "--redis-url",
        &redis.url(),
    ])
    .args(["--jwt-secret", seckill_testkit::JWT_SECRET]);
    ServerProcess::spawn(cmd, addr)
}

/// Settings of the native server.
#[derive(clap::Args, Clone)]
pub struct NativeArgs {
    /// Address to listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// The sale's Redis.
    #[arg(long)]
    pub redis_url: String,
    /// The shop's JWT key.
    #[arg(long)]
    pub jwt_secret: String,
}

/// Sync Redis connections, one per request in flight (scripts run on blocking threads).
struct Pool {
    client: redis::Client,
    idle: Mutex<Vec<redis::Connection>>,
}

impl Pool {
    fn with<T>(&self, f: impl FnOnce(&NativeStore<redis::Connection>) -> T) -> Result<T> {
        let conn = match self.idle.lock().unwrap().pop() {
            Some(c) => c,
            None => self.client.get_connection()?,
        };
        let store = NativeStore::new(conn);
        let out = f(&store);
        self.idle
            .lock()
            .unwrap()
            .push(store.0.into_inner().unwrap());
        Ok(out)
    }
}

fn json(status: u16, body: Vec<u8>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .expect("valid response")
}

async fn buy(
    pool: Arc<Pool>,
    secret: Arc<String>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let result = async {
        let path = req.uri().path().to_owned();
        let domain = |e: seckill_domain::Error| ApiError::from(e);
        let event = path
            .strip_prefix("/api/events/")
            .and_then(|p| p.strip_suffix("/buy"))
            .ok_or_else(|| ApiError::not_found("no route"))?;
        let event = EventId::parse(event).map_err(domain)?;
        let bearer = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| ApiError::new(ErrorCode::Unauthorized, "bearer token required"))?
            .to_owned();
        let user = auth::verify_jwt(&bearer, secret.as_bytes(), clock::now_ms() / 1000)
            .map_err(domain)?
            .sub;
        let body = req
            .into_body()
            .collect()
            .await
            .map_err(ApiError::internal)?
            .to_bytes();
        #[derive(serde::Deserialize)]
        struct Body {
            purchase_token: String,
        }
        let body: Body = serde_json::from_slice(&body)
            .map_err(|e| ApiError::new(ErrorCode::MalformedJson, e.to_string()))?;
        tokio::task::spawn_blocking(move || {
            pool.with(|store| {
                let nodes = Nodes::one(store);
                sale::buy(
                    &nodes,
                    &event,
                    crate::fixture::SHARDS,
                    &user,
                    &body.purchase_token,
                    clock::now_ms(),
                )
                .map(|b| b.accepted)
            })
        })
        .await
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)?
        .map_err(domain)
    }
    .await;
    match result {
        Ok(accepted) => json(202, serde_json::to_vec(&accepted).unwrap_or_default()),
        Err(e) => json(e.status, e.to_json().into_bytes()),
    }
}

/// Serves `POST /api/events/{id}/buy` until killed.
pub async fn serve(args: NativeArgs) -> Result<()> {
    let pool = Arc::new(Pool {
        client: redis::Client::open(args.redis_url)?,
        idle: Mutex::new(Vec::new()),
    });
    let secret = Arc::new(args.jwt_secret);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let (pool, secret) = (pool.clone(), secret.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let (pool, secret) = (pool.clone(), secret.clone());
                async move { Ok::<_, Infallible>(buy(pool, secret, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
