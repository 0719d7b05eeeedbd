//! The one error type every HTTP function returns: a status, a stable machine-readable `code`,
//! and a message for humans. Rendered as `{"error": {"code": "...", "message": "..."}}`.

use serde::Serialize;

/// An error a client can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Stable identifier clients may switch on (`snake_case`).
    pub code: &'static str,
    /// Human-readable detail.
    pub message: String,
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    /// An error with any status.
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(400, code, message)
    }

    /// 404: no such route or resource.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, "not_found", message)
    }

    /// 405: the route exists but not with this method.
    pub fn method_not_allowed(allowed: &str) -> Self {
        Self::new(405, "method_not_allowed", format!("allowed: {allowed}"))
    }

    /// 500: our fault; the message is logged, the client gets a generic one.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        eprintln!("internal error: {detail}");
        Self::new(500, "internal", "internal error")
    }

    /// 503: a dependency is down.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "unavailable", message)
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&Envelope {
            error: Body {
                code: self.code,
                message: &self.message,
            },
        })
        .expect("plain strings always serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_stable_envelope() {
        let e = ApiError::bad_request("malformed_json", "expected `{`");
        assert_eq!(
            e.to_json(),
            r#"{"error":{"code":"malformed_json","message":"expected `{`"}}"#
        );
    }
}
