//! The error every HTTP function returns: a status, a stable machine-readable `code`, and a
//! message for humans, rendered as `{"error": {"code": "...", "message": "..."}}`. The domain's
//! errors become one here, through the one table from code to HTTP status ([`status_of`]).

use seckill_domain::Error;
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

/// The HTTP status of each code the domain answers with (`api/openapi.yaml`, `ErrorCode`).
pub fn status_of(code: &str) -> u16 {
    match code {
        "malformed_json" | "bad_event_id" | "invalid_config" | "invalid_deny_list"
        | "bad_order_id" | "unreadable_body" | "bad_query" => 400,
        "unauthorized" => 401,
        "not_admitted" | "denied" | "not_selected" | "bad_purchase_token" => 403,
        "event_not_found" | "order_not_found" | "not_found" => 404,
        "method_not_allowed" => 405,
        "already_bought" | "order_expired" | "conflict" => 409,
        "sold_out" | "sale_ended" | "admission_closed" => 410,
        "body_too_large" => 413,
        "too_early" => 425,
        "rate_limited" => 429,
        "sale_paused" | "unavailable" => 503,
        _ => 500,
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Invalid { code, message } => ApiError::new(status_of(code), code, message),
            Error::Refused {
                code,
                message,
                retry_after_ms,
            } => {
                let e = ApiError::new(status_of(code), code, message);
                match retry_after_ms {
                    Some(ms) => e.retry_after_ms(ms),
                    None => e,
                }
            }
            Error::Unavailable {
                message, detail, ..
            } => ApiError::unavailable(message).with_detail(detail),
            Error::Bug { detail } => ApiError::internal(detail),
        }
    }
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
    use seckill_domain::error::Dependency;

    #[test]
    fn every_domain_code_has_its_documented_status() {
        for (code, status) in [
            ("malformed_json", 400),
            ("not_admitted", 403),
            ("event_not_found", 404),
            ("order_expired", 409),
            ("sold_out", 410),
            ("too_early", 425),
            ("rate_limited", 429),
            ("sale_paused", 503),
        ] {
            assert_eq!(status_of(code), status, "{code}");
        }
        let paused: ApiError = Error::refused_for("sale_paused", "paused", 5_000).into();
        assert_eq!(paused.header, Some(("retry-after", "5".to_owned())));
        let down: ApiError =
            Error::unavailable(Dependency::Redis, "busy", "connection refused").into();
        assert_eq!(
            (down.status, down.detail.as_deref()),
            (503, Some("connection refused"))
        );
    }

    #[test]
    fn renders_the_stable_envelope() {
        let e = ApiError::bad_request("malformed_json", "expected `{`");
        assert_eq!(
            e.to_json(),
            r#"{"error":{"code":"malformed_json","message":"expected `{`"}}"#
        );
    }
}
