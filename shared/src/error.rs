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
    /// A header the status calls for: `retry-after` (425, 429, 503) or `allow` (405).
    pub header: Option<(&'static str, String)>,
    /// What went wrong underneath (a dependency's own words): logged once by the edge that
    /// renders the error, never sent to the client.
    pub detail: Option<String>,
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
            header: None,
            detail: None,
        }
    }

    /// Attaches what went wrong underneath, for the log.
    pub fn with_detail(mut self, detail: impl std::fmt::Display) -> Self {
        self.detail = Some(detail.to_string());
        self
    }

    /// Tells the client when to try again (`Retry-After`, whole seconds, at least 1).
    pub fn retry_after_ms(mut self, ms: u64) -> Self {
        self.header = Some(("retry-after", ms.div_ceil(1000).max(1).to_string()));
        self
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
        let mut e = Self::new(405, "method_not_allowed", format!("allowed: {allowed}"));
        e.header = Some(("allow", allowed.to_owned()));
        e
    }

    /// 500: our fault (a script or data error, a bad variable); the client gets a generic
    /// message, the detail goes to the log.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::new(500, "internal", "internal error").with_detail(detail)
    }

    /// 503: a dependency could not be reached or timed out; worth retrying in a second.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "unavailable", message).retry_after_ms(1_000)
    }

    /// What an operator's report shows for this error: the detail when there is one.
    pub fn reason(&self) -> String {
        self.detail.clone().unwrap_or_else(|| self.message.clone())
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
