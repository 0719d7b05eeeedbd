//! An OpenTelemetry collector's receiving side, as the OTLP specification's OTLP/HTTP says:
//! `POST /v1/traces` with a binary protobuf `ExportTraceServiceRequest`, answered `200` with an
//! `ExportTraceServiceResponse`; decoded with the official protobuf definitions
//! (`opentelemetry-proto`). Keeps every span it received.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

/// A span as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub name: String,
    /// Hex, as in a `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// String attributes (others as their debug text).
    pub attributes: Vec<(String, String)>,
}

impl ReceivedSpan {
    /// The value of attribute `key`.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find_map(|(k, v)| (k == key).then_some(v.as_str()))
    }
}

/// The receiver, on a free loopback port until dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    server: tokio::task::JoinHandle<()>,
}

impl OtlpReceiver {
    pub async fn start() -> Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let spans = Arc::new(Mutex::new(Vec::new()));
        let server = tokio::spawn({
            let spans = spans.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let spans = spans.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let spans = spans.clone();
                            async move { receive(req, &spans).await }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        });
        Ok(OtlpReceiver {
            addr,
            spans,
            server,
        })
    }

    /// The endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter adds `/v1/traces`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the spans received, at most `timeout`; the spans then.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let start = Instant::now();
        loop {
            let spans = self.spans();
            if done(&spans) || start.elapsed() > timeout {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(
    req: Request<hyper::body::Incoming>,
    spans: &Mutex<Vec<ReceivedSpan>>,
) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let answer = |status: u16, body: Vec<u8>| {
        let mut resp = Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = hyper::StatusCode::from_u16(status).expect("a status");
        resp.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/x-protobuf"),
        );
        resp
    };
    if req.method() != hyper::Method::POST || req.uri().path() != "/v1/traces" {
        return Ok(answer(404, Vec::new()));
    }
    let body = req.into_body().collect().await?.to_bytes();
    let Ok(export) = ExportTraceServiceRequest::decode(body) else {
        return Ok(answer(400, Vec::new()));
    };
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut received = spans.lock().unwrap();
    for resource in export.resource_spans {
        for scope in resource.scope_spans {
            for span in scope.spans {
                let attributes = span
                    .attributes
                    .iter()
                    .map(|kv| {
                        let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
                        let text = match value {
                            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => s.clone(),
                            Some(other) => format!("{other:?}"),
                            None => String::new(),
                        };
                        (kv.key.clone(), text)
                    })
                    .collect();
                received.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes,
                });
            }
        }
    }
    Ok(answer(
        200,
        ExportTraceServiceResponse::default().encode_to_vec(),
    ))
}
