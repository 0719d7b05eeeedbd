//! The trivial component: the baseline for what the host itself costs per request.

use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;

/// Answers `hello` to everything.
#[http_component]
fn handle(_req: Request) -> Response {
    Response::new(200, "hello")
}
