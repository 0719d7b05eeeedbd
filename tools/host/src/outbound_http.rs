//! `wasi:http/outgoing-handler`, restricted by `allowed_outbound_hosts` as in Spin: a request to a
//! host the manifest does not allow fails with `HttpRequestDenied` before any connection is made.

use std::sync::Arc;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::allowed_hosts::default_port;
use crate::state::ComponentConfig;

/// The outbound HTTP policy of one instance.
pub struct OutboundHttp {
    component: Arc<ComponentConfig>,
}

impl OutboundHttp {
    /// The policy of `component`.
    pub fn new(component: Arc<ComponentConfig>) -> Self {
        OutboundHttp { component }
    }

    fn allowed(&self, uri: &http::Uri) -> bool {
        let scheme = uri.scheme_str().unwrap_or("https");
        let Some(host) = uri.host() else { return false };
        let Some(port) = uri.port_u16().or_else(|| default_port(scheme)) else {
            return false;
        };
        self.component.allowed_hosts.allows(scheme, host, port)
    }
}

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

impl WasiHttpHooks for OutboundHttp {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> ResponseFuture {
        if !self.allowed(request.uri()) {
            tracing::warn!(component = %self.component.id, uri = %request.uri(), "outbound HTTP denied by allowed_outbound_hosts");
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        _ = fut;
        Box::new(async move {
            use http_body_util::BodyExt;
            let (res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                res.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}
