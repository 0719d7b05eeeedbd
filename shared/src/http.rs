//! Rendering responses: JSON bodies and [`ApiError`]s, the same way in every function.

use serde::Serialize;
use spin_sdk::http::{Method, Request, Response};

use crate::ApiError;

/// A JSON response with `status`.
pub fn json<T: Serialize>(status: u16, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .header("cache-control", "no-store")
            .body(bytes)
            .build(),
        Err(e) => error(&ApiError::internal(e)),
    }
}

/// The JSON rendering of an error.
pub fn error(e: &ApiError) -> Response {
    Response::builder()
        .status(e.status)
        .header("content-type", "application/json")
        .header("cache-control", "no-store")
        .body(e.to_json())
        .build()
}

/// Renders the outcome of a function: `Ok` as JSON with `status`, `Err` as its error.
pub fn respond<T: Serialize>(status: u16, result: Result<T, ApiError>) -> Response {
    match result {
        Ok(body) => json(status, &body),
        Err(e) => error(&e),
    }
}

/// Refuses any method but `allowed`.
pub fn require_method(req: &Request, allowed: Method) -> Result<(), ApiError> {
    if *req.method() == allowed {
        Ok(())
    } else {
        Err(ApiError::method_not_allowed(&allowed.to_string()))
    }
}
