//! OpenTelemetry traces, as Spin emits them (`crates/telemetry` at v3.6.3): on when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set and not empty and
//! `OTEL_SDK_DISABLED` is not (`env.rs`), exported over OTLP/HTTP with protobuf by a batch span
//! processor on the Tokio runtime (`traces.rs`), the other `OTEL_*` variables read by the SDK
//! (the sampler `OTEL_TRACES_SAMPLER`/`_ARG`, the batch's `OTEL_BSP_*`, the resource's
//! `OTEL_SERVICE_NAME`/`OTEL_RESOURCE_ATTRIBUTES`). The batch processor exports off the request
//! path and drops spans when its queue is full, never blocking a request.
//!
//! The spans are Spin's: `spin_trigger_http.handle_http_request` per request, named
//! `{method} {route}` (`crates/trigger-http/src/instrument.rs`) and a child of the incoming W3C
//! `traceparent`; `spin_outbound_redis.*`, `spin_outbound_pg.*` and
//! `spin_outbound_http.send_request` per outbound call (their factors' `host.rs`/`spin.rs`), the
//! outgoing HTTP request carrying the `traceparent`. Where Spin names a Redis span with its key
//! (`GET {key}`) or a Postgres span with its statement, these carry the command or the
//! statement's verb alone: a span name stays low-cardinality and holds no user id, key or SQL.
//!
//! Off, every span is [`Span::none`]: the hot path pays one relaxed load.

use std::sync::OnceLock;

use anyhow::Result;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The tracer provider, once traces are on.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Whether the environment turns traces on (Spin's `otel_tracing_enabled`).
pub fn enabled_by_env() -> bool {
    let set = |key: &str| std::env::var_os(key).is_some_and(|v| !v.is_empty());
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !set("OTEL_SDK_DISABLED")
}

/// Whether spans are being exported.
pub fn on() -> bool {
    PROVIDER.get().is_some()
}

/// The layer that exports spans, when the environment turns traces on; `None` otherwise. Call
/// within the Tokio runtime the batch processor is to run on.
pub fn layer<S>() -> Result<Option<impl Layer<S>>>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span>,
{
    if !enabled_by_env() {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(
            std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "seckill-host".to_owned()),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_span_processor(processor)
        .build();
    let tracer = provider.tracer("seckill-host");
    let _ = PROVIDER.set(provider);
    Ok(Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                meta.is_span() && meta.name().starts_with("spin_")
            })),
    ))
}

/// Exports what is batched and stops the exporter (at the host's exit).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get()
        && let Err(e) = provider.shutdown()
    {
        tracing::warn!("traces: {e}");
    }
}

/// The span of an HTTP request, a child of its `traceparent` if it has one; named with its
/// route by [`name_request`] once routed.
pub fn request_span(req: &http::Request<impl Sized>, client: std::net::SocketAddr) -> Span {
    if !on() {
        return Span::none();
    }
    let span = tracing::info_span!(
        "spin_trigger_http.handle_http_request",
        "otel.kind" = "server",
        "otel.name" = %req.method(),
        "http.request.method" = %req.method(),
        "network.peer.address" = %client.ip(),
        "network.protocol.name" = "http",
        "url.path" = req.uri().path(),
        "http.route" = tracing::field::Empty,
        "http.response.status_code" = tracing::field::Empty,
    );
    let parent = TraceContextPropagator::new().extract(&Headers(req.headers()));
    let _ = span.set_parent(parent);
    span
}

/// Names `span` `{method} {route}` after the manifest route that answered it, with its status.
pub fn name_request(span: &Span, method: &http::Method, route: &str, status: u16) {
    if span.is_none() {
        return;
    }
    // Recorded as `otel.name` the name would be lost once a child started the span.
    span.context()
        .span()
        .update_name(format!("{method} {route}"));
    span.record("http.route", route);
    span.record("http.response.status_code", status);
}

/// The span of one outbound call, named as Spin names it (`$name`), with what it calls
/// (`"db.system" = "redis"`, `"http.request.method" = …`), displayed as `$otel_name`
/// (low-cardinality). Its fields are evaluated only while traces are on.
macro_rules! client_span {
    ($name:literal, $key:literal = $value:expr, $otel_name:expr) => {
        if $crate::telemetry::on() {
            tracing::info_span!(
                $name,
                "otel.kind" = "client",
                $key = $value,
                "otel.name" = $otel_name
            )
        } else {
            tracing::Span::none()
        }
    };
}
pub(crate) use client_span;

/// A Redis command's name for a span: the command alone, or `OTHER` for what is not one.
pub fn redis_command(command: &str) -> String {
    keyword(command)
}

/// A statement's verb for a span (`SELECT`, `INSERT`, …): never its text or values.
pub fn sql_verb(statement: &str) -> String {
    keyword(statement.split_whitespace().next().unwrap_or(""))
}

/// `word` upper-cased if it is a keyword (letters and dots, at most 32), else `OTHER`: what a
/// span name may hold without a key, a value or an unbounded set of names.
fn keyword(word: &str) -> String {
    let is_keyword = word.len() <= 32 && word.bytes().all(|b| b.is_ascii_alphabetic() || b == b'.');
    match is_keyword {
        true => word.to_ascii_uppercase(),
        false => "OTHER".to_owned(),
    }
}

/// Adds the current span's `traceparent` to an outgoing request's `headers`.
pub fn inject(headers: &mut http::HeaderMap) {
    if !on() {
        return;
    }
    let context = Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut HeadersMut(headers));
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct HeadersMut<'a>(&'a mut http::HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_hold_a_command_or_a_verb_never_keys_or_statements() {
        assert_eq!(redis_command("evalsha"), "EVALSHA");
        assert_eq!(redis_command("GET user:42"), "OTHER");
        assert_eq!(redis_command(&"X".repeat(33)), "OTHER");
        assert_eq!(
            sql_verb("SELECT status FROM orders WHERE order_id = $1"),
            "SELECT"
        );
        assert_eq!(sql_verb("  insert into orders values ($1)"), "INSERT");
        assert_eq!(sql_verb("'; DROP TABLE orders"), "OTHER");
    }

    #[test]
    fn spans_are_disabled_until_traces_are_on() {
        // Nothing here called `layer`: every span is a disabled one.
        assert!(!on());
        let req = http::Request::new(());
        assert!(request_span(&req, "127.0.0.1:1".parse().unwrap()).is_none());
    }
}
