//! The HTTP trigger: a hyper server that routes each request like Spin, adds Spin's request
//! headers, and runs it in a fresh instance of the matched component.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use futures::FutureExt;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;

use crate::app::App;
use crate::routes::RouteMatch;

/// The body of every response this server sends.
pub type ResponseBody = UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>;

/// Serves `app` on `listener` until the task is dropped.
pub async fn serve(app: Arc<App>, listener: TcpListener) -> Result<()> {
    let local = listener.local_addr()?;
    loop {
        let (stream, client) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: keep serving.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let app = app.clone();
                async move { Ok::<_, Infallible>(handle(&app, req, client, local).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("connection from {client} ended: {e}");
            }
        });
    }
}

/// Routes and runs one request.
pub async fn handle(
    app: &App,
    mut req: Request<Incoming>,
    client: SocketAddr,
    local: SocketAddr,
) -> Response<ResponseBody> {
    let Some((c, matched)) = app.router.route(req.uri().path()) else {
        return plain(StatusCode::NOT_FOUND, "Not Found");
    };
    set_spin_headers(&mut req, &matched, client, local);
    match run(app, c, req).await {
        Ok(resp) => resp,
        Err(e) => {
            tracing::error!(component = %app.components[c].config.id, "request failed: {e:?}");
            plain(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error")
        }
    }
}

async fn run(app: &App, c: usize, req: Request<Incoming>) -> Result<Response<ResponseBody>> {
    let pre = app.components[c]
        .http
        .as_ref()
        .expect("routes only point at HTTP components");
    let slot = app.slots.clone().acquire_owned().await?;
    let mut store = app.store(c);
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let req = store
        .data_mut()
        .http()
        .new_incoming_request(Scheme::Http, req)?;
    let out = store.data_mut().http().new_response_outparam(tx)?;
    let proxy = pre.instantiate_async(&mut store).await?;
    let mut call = Box::pin(async move {
        let result = proxy
            .wasi_http_incoming_handler()
            .call_handle(&mut store, req, out)
            .await;
        // The instance, and with it the pool slot, is gone only with the store.
        drop(store);
        drop(slot);
        result
    });
    // Run the guest in this task until it sends the response head.
    let (head, finished) = tokio::select! {
        biased;
        head = &mut rx => (head, false),
        result = &mut call => match rx.await {
            Err(_) => match result {
                // The sender was dropped without a response: the guest trapped or returned early.
                Err(trap) => return Err(anyhow::anyhow!("guest trapped: {trap:?}")),
                Ok(()) => anyhow::bail!("guest returned without sending a response"),
            },
            head => (head, true),
        },
    };
    // The guest may still be writing the body after the head. Usually it has finished by now;
    // if not, it goes on in a task of its own (a spawn per request cost cross-thread wake-ups).
    if !finished && call.as_mut().now_or_never().is_none() {
        tokio::spawn(call);
    }
    match head {
        Ok(Ok(resp)) => Ok(resp),
        Ok(Err(code)) => anyhow::bail!("guest returned error code {code:?}"),
        Err(_) => anyhow::bail!("guest dropped the response"),
    }
}

/// Spin's request headers (`crates/trigger-http/src/headers.rs`). Built straight into the
/// header map: this runs on every request.
fn set_spin_headers(
    req: &mut Request<Incoming>,
    m: &RouteMatch,
    client: SocketAddr,
    local: SocketAddr,
) {
    let path_and_query = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let full_url = match req.headers().get(http::header::HOST) {
        Some(host) => [b"http://", host.as_bytes(), path_and_query.as_bytes()].concat(),
        None => format!("http://{local}{path_and_query}").into_bytes(),
    };
    let fixed = [
        ("spin-path-info", m.path_info.as_str()),
        ("spin-matched-route", m.matched_route.as_str()),
        ("spin-component-route", m.component_route.as_str()),
        ("spin-raw-component-route", m.raw_route.as_str()),
        ("spin-base-path", "/"),
    ];
    let client = client.to_string();
    let headers = req.headers_mut();
    if let Ok(v) = HeaderValue::from_bytes(&full_url) {
        headers.insert(HeaderName::from_static("spin-full-url"), v);
    }
    for (name, value) in fixed
        .into_iter()
        .chain([("spin-client-addr", client.as_str())])
    {
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
    for (name, value) in &m.captures {
        let name = format!("spin-path-match-{}", name.to_ascii_lowercase());
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::from_str(value)) {
            headers.insert(name, value);
        }
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<ResponseBody> {
    let body = Full::new(Bytes::from_static(text.as_bytes())).map_err(|never| match never {});
    let mut resp = Response::new(body.boxed_unsync());
    *resp.status_mut() = status;
    resp
}
