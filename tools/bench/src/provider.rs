//! `seckill-bench provider`: a payment provider's hosted checkout, for the browser tests and a
//! local sale. `GET /checkout?payment_id=…&amount=…&currency=…` shows the amount and a Pay
//! button; pressing it charges and the provider confirms the payment to the app's webhook,
//! signed and redelivered as Stripe does ([`seckill_testkit::Provider`]). A sandbox: it charges
//! nobody.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use seckill_testkit::Provider;

/// `provider` flags.
#[derive(clap::Args)]
pub struct ProviderArgs {
    /// Where to serve the checkout.
    #[arg(long, default_value = "127.0.0.1:3100")]
    listen: SocketAddr,
    /// The app's webhook (`…/api/payments/webhook`).
    #[arg(long)]
    webhook: String,
    /// The webhook signing secret (the app's `payment_webhook_secrets` holds it).
    #[arg(long)]
    secret: String,
}

/// Serves the checkout until killed.
pub async fn serve(args: ProviderArgs) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!(
        "provider sandbox on http://{}/checkout",
        listener.local_addr()?
    );
    serve_on(listener, args.webhook, &args.secret).await
}

/// Serves the checkout on `listener`, confirming to `webhook` signed with `secret`.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    webhook: String,
    secret: &str,
) -> Result<()> {
    let provider = Arc::new(Provider::new(reqwest::Client::new(), webhook, secret));
    loop {
        let (stream, _) = listener.accept().await?;
        let provider = provider.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let provider = provider.clone();
                async move { Ok::<_, Infallible>(answer(&provider, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The `name=value` pairs of a query or a form (ids, digits and letters: nothing escaped).
fn field<'a>(pairs: &'a str, name: &str) -> &'a str {
    pairs
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or("")
}

fn safe(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn page(status: u16, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/html; charset=utf-8")
        .body(Full::new(Bytes::from(format!(
            "<!doctype html><meta charset=utf-8><title>Checkout (sandbox)</title>\
             <body style=\"font-family:sans-serif;max-width:28em;margin:3em auto\">{body}</body>"
        ))))
        .expect("a valid response")
}

async fn answer(provider: &Provider, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let query = req.uri().query().unwrap_or("").to_owned();
    let post = req.method() == hyper::Method::POST;
    let form = if post {
        match req.into_body().collect().await {
            Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
            Err(_) => String::new(),
        }
    } else {
        query
    };
    let (id, amount, currency) = (
        field(&form, "payment_id"),
        field(&form, "amount"),
        field(&form, "currency"),
    );
    let Ok(minor) = amount.parse::<i64>() else {
        return page(400, "<p>No amount to pay.</p>".into());
    };
    if !safe(id) || !safe(currency) {
        return page(400, "<p>No payment to pay.</p>".into());
    }
    let shown = format!(
        "{}.{:02} {}",
        minor / 100,
        minor % 100,
        currency.to_uppercase()
    );
    if !post {
        return page(
            200,
            format!(
                "<h1>Pay {shown}</h1><p>Payment {id} (sandbox: nobody is charged).</p>\
                 <form method=post action=/checkout>\
                 <input type=hidden name=payment_id value={id}>\
                 <input type=hidden name=amount value={minor}>\
                 <input type=hidden name=currency value={currency}>\
                 <button id=pay>Pay {shown}</button></form>"
            ),
        );
    }
    let (_, event) = provider.succeeded_event(id, minor, currency);
    match provider.deliver(&event).await {
        Ok(d) if d.status == 200 => page(
            200,
            format!(
                "<h1 id=done>Payment complete</h1><p>{shown} paid. The shop says: {}. You can close this window.</p>",
                d.body["outcome"].as_str().unwrap_or("?")
            ),
        ),
        Ok(d) => page(
            502,
            format!("<p>The shop refused the payment: {}</p>", d.body),
        ),
        Err(e) => page(502, format!("<p>The shop did not answer: {e}</p>")),
    }
}
