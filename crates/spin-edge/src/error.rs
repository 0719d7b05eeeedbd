//! The error every HTTP function returns: a status, a stable machine-readable `code`, and a
//! message for humans, rendered as `{"error": {"code": "...", "message": "..."}}`. The domain's
//! errors become one here; a code's HTTP status is [`status_of`], an exhaustive match, so a new
//! code does not compile until it has one.

use seckill_domain::Error;
use seckill_domain::error::ErrorCode;
use serde::Serialize;

/// An error a client can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Stable identifier clients may switch on.
    pub code: ErrorCode,
    /// Human-readable detail.
    pub message: String,
    /// A header the status calls for: `retry-after` (425, 429, 503) or `allow` (405).
    pub header: Option<(&'static str, String)>,
    /// What went wrong underneath (a dependency's own words): logged once by the edge that
    /// renders the error, never sent to the client.
    pub detail: Option<String>,
}

/// The HTTP status of each code (`api/openapi.yaml`, `ErrorCode`, lists the same pairs; a test
/// holds them together).
pub fn status_of(code: ErrorCode) -> u16 {
    use ErrorCode::*;
    match code {
        MalformedJson | BadEventId | InvalidConfig | InvalidDenyList | InvalidEndpoint
        | BadOrderId | BadQuery | UnreadableBody | BadUserId | BadChallenge | BadSignature => 400,
        Unauthorized => 401,
        Forbidden | NotAdmitted | Denied | NotSelected | BadPurchaseToken | NotReleased => 403,
        EventNotFound | OrderNotFound | NotFound | DemoLoginOff => 404,
        MethodNotAllowed => 405,
        AlreadyBought | OrderExpired | Conflict | ChallengeUsed => 409,
        SoldOut | SaleEnded | AdmissionClosed => 410,
        BodyTooLarge => 413,
        TooEarly | AdmissionNotOpen => 425,
        ChallengeRequired => 428,
        RateLimited => 429,
        Internal => 500,
        ProviderRefused => 502,
        SalePaused | Unavailable | ProviderBusy => 503,
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Invalid { code, message } => ApiError::new(code, message),
            Error::Refused {
                code,
                message,
                retry_after_ms,
            } => {
                let e = ApiError::new(code, message);
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
    code: &'static str,
    message: &'a str,
}

impl ApiError {
    /// An error with `code`'s status.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status: status_of(code),
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

    /// 404: no such route or resource.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// 405: the route exists but not with this method.
    pub fn method_not_allowed(allowed: &str) -> Self {
        let mut e = Self::new(ErrorCode::MethodNotAllowed, format!("allowed: {allowed}"));
        e.header = Some(("allow", allowed.to_owned()));
        e
    }

    /// 500: our fault (a script or data error, a bad variable); the client gets a generic
    /// message, the detail goes to the log.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Internal, "internal error").with_detail(detail)
    }

    /// 503: a dependency could not be reached or timed out; worth retrying in a second.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message).retry_after_ms(1_000)
    }

    /// What an operator's report shows for this error: the detail when there is one.
    pub fn reason(&self) -> String {
        self.detail.clone().unwrap_or_else(|| self.message.clone())
    }

    /// The JSON body.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&Envelope {
            error: Body {
                code: self.code.as_str(),
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
    use std::collections::BTreeMap;

    /// `api/openapi.yaml`'s `ErrorCode` schema: its `enum` and its table's (code, status) rows.
    fn documented_codes() -> (Vec<String>, BTreeMap<String, u16>) {
        let spec = include_str!("../../../api/openapi.yaml");
        let schema = spec
            .split("\n    ErrorCode:\n")
            .nth(1)
            .expect("the spec has an ErrorCode schema");
        // The schema ends where the next line indented by exactly four spaces (its sibling) starts.
        let end = schema
            .match_indices("\n    ")
            .find(|(i, _)| !schema[i + 5..].starts_with(' '))
            .map_or(schema.len(), |(i, _)| i);
        let schema = &schema[..end];
        let mut table = BTreeMap::new();
        let mut listed = Vec::new();
        let mut in_enum = false;
        for line in schema.lines().map(str::trim) {
            if let Some(row) = line.strip_prefix("| `") {
                let (code, rest) = row.split_once('`').expect("| `code` | status |");
                let status = rest
                    .trim_start_matches([' ', '|'])
                    .split(' ')
                    .next()
                    .unwrap();
                table.insert(code.to_owned(), status.parse().expect("a status"));
            } else if line == "enum:" {
                in_enum = true;
            } else if in_enum && let Some(code) = line.strip_prefix("- ") {
                listed.push(code.to_owned());
            }
        }
        (listed, table)
    }

    #[test]
    fn the_spec_lists_every_code_with_its_status_and_nothing_else() {
        let (listed, table) = documented_codes();
        let ours: BTreeMap<String, u16> = ErrorCode::ALL
            .iter()
            .map(|c| (c.as_str().to_owned(), status_of(*c)))
            .collect();
        let mut listed_sorted = listed.clone();
        listed_sorted.sort();
        assert_eq!(
            listed_sorted,
            ours.keys().cloned().collect::<Vec<_>>(),
            "ErrorCode's enum in api/openapi.yaml vs ErrorCode::ALL"
        );
        assert_eq!(table, ours, "the spec's (code, status) table vs status_of");
    }

    #[test]
    fn a_refusal_keeps_its_retry_hint_and_an_outage_its_detail() {
        let paused: ApiError = Error::refused_for(ErrorCode::SalePaused, "paused", 5_000).into();
        assert_eq!(
            (paused.status, paused.header),
            (503, Some(("retry-after", "5".to_owned())))
        );
        let down: ApiError =
            Error::unavailable(Dependency::Redis, "busy", "connection refused").into();
        assert_eq!(
            (down.status, down.code, down.detail.as_deref()),
            (503, ErrorCode::Unavailable, Some("connection refused"))
        );
    }

    #[test]
    fn renders_the_stable_envelope() {
        let e = ApiError::new(ErrorCode::MalformedJson, "expected `{`");
        assert_eq!(
            e.to_json(),
            r#"{"error":{"code":"malformed_json","message":"expected `{`"}}"#
        );
    }
}
