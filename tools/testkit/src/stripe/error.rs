//! Stripe's error object, <https://docs.stripe.com/api/errors>: `{"error": {"type", "code",
//! "param", "message", "doc_url"}}` with `type` one of `api_error`, `card_error`,
//! `idempotency_error`, `invalid_request_error`, and the status codes of its summary table
//! (400 bad request, 401 no valid key, 402 request failed, 403 key lacks permission, 404 no
//! such resource, 409 conflict, 429 too many requests, 5xx Stripe's side).
//!
//! The messages follow what Stripe answers (the reference does not list them; they are the
//! wordings its SDKs and users quote, e.g. "Received unknown parameter: …", "Missing
//! required param: …", "Keys for idempotent requests can only be used with the same
//! parameters they were first used with…"). Where the docs name a `code`
//! (<https://docs.stripe.com/error-codes>) the error carries it and its `doc_url`.

use serde_json::{Value, json};

/// One error answer.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<String>,
    pub message: String,
    /// `Stripe-Should-Retry`, when Stripe sends it for this error.
    pub should_retry: Option<bool>,
    /// `Stripe-Rate-Limited-Reason` on a 429 (<https://docs.stripe.com/rate-limits>).
    pub rate_limited_reason: Option<&'static str>,
}

impl ApiError {
    fn new(status: u16, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            code: None,
            param: None,
            message: message.into(),
            should_retry: None,
            rate_limited_reason: None,
        }
    }

    /// A 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request_error", message)
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// `parameter_unknown`.
    pub fn unknown(param: &str) -> Self {
        Self::invalid(format!("Received unknown parameter: {param}"))
            .with_code("parameter_unknown")
            .with_param(param)
    }

    /// `parameter_missing`.
    pub fn missing(param: &str) -> Self {
        Self::invalid(format!("Missing required param: {param}."))
            .with_code("parameter_missing")
            .with_param(param)
    }

    /// A documented parameter the sandbox does not play: refused rather than ignored, so a
    /// test never passes on behaviour the sandbox only pretends to have.
    pub fn unmodelled(param: &str) -> Self {
        Self::invalid(format!(
            "The seckill Stripe sandbox does not model the documented parameter `{param}`: \
             extend tools/testkit/src/stripe before relying on it."
        ))
        .with_param(param)
    }

    /// `resource_missing` for an object named in the path (404) or in a parameter (400).
    pub fn no_such(object: &str, id: &str, param: &str, status: u16) -> Self {
        Self::invalid(format!("No such {object}: '{id}'"))
            .with_code("resource_missing")
            .with_param(param)
            .with_status(status)
    }

    /// 401: no key, or a key this account does not have.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, "invalid_request_error", message)
    }

    /// 403: a restricted key without the permission.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "invalid_request_error", message)
    }

    /// 400 `idempotency_error`.
    pub fn idempotency(message: impl Into<String>) -> Self {
        Self::new(400, "idempotency_error", message)
    }

    /// 500 `api_error`. Stripe's idempotency layer replays a 500 for its key, so it tells
    /// the SDKs not to retry it blindly (`Stripe-Should-Retry: false`).
    pub fn server() -> Self {
        let mut e = Self::new(
            500,
            "api_error",
            "An unknown error occurred (injected by the seckill Stripe sandbox).",
        );
        e.should_retry = Some(false);
        e
    }

    /// 429 `rate_limit` (type `invalid_request_error`), with the limiter that refused it.
    pub fn rate_limited(reason: &'static str) -> Self {
        let mut e = Self::new(
            429,
            "invalid_request_error",
            "Request rate limit exceeded. Learn more about rate limits here \
             https://stripe.com/docs/rate-limits.",
        )
        .with_code("rate_limit");
        e.rate_limited_reason = Some(reason);
        e
    }

    /// 429 `lock_timeout`: another request holds the object; safe to retry
    /// (`Stripe-Should-Retry: true`).
    pub fn lock_timeout() -> Self {
        let mut e = Self::new(
            429,
            "invalid_request_error",
            "This object cannot be accessed right now because another API request or Stripe \
             process is currently accessing it. If you see this error intermittently, retry \
             the request. If you see this error frequently and are making multiple concurrent \
             requests to a single object, make your requests serially or at a lower rate.",
        )
        .with_code("lock_timeout");
        e.should_retry = Some(true);
        e
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut error = json!({ "type": self.kind, "message": self.message });
        if let Some(code) = self.code {
            error["code"] = json!(code);
            error["doc_url"] = json!(format!(
                "https://stripe.com/docs/error-codes/{}",
                code.replace('_', "-")
            ));
        }
        if let Some(param) = &self.param {
            error["param"] = json!(param);
        }
        json!({ "error": error })
    }
}
