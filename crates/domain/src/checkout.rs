//! The payment provider's API as we call it: Stripe's Checkout Sessions (create, retrieve,
//! expire), form-encoded, each write under an `Idempotency-Key`, at a pinned `Stripe-Version`
//! (<https://docs.stripe.com/api/checkout/sessions>). The transport ([`ProviderApi`]) is the
//! edge's; this module builds the calls and reads the answers, so another provider that works
//! the same way fits behind the same functions.

use serde::Deserialize;

use crate::error::{Dependency, Error, ErrorCode};

/// The API version our requests are written against (`Stripe-Version`).
pub const API_VERSION: &str = "2024-06-20";

/// How long a session stays payable at the provider at least: Stripe takes an `expires_at`
/// from 30 minutes to 24 hours ahead. Our deadline is usually sooner; timeout release expires
/// the session first (see [`expire_session`]), so this only bounds a session nobody expires.
pub const SESSION_LIFETIME_S: u64 = 31 * 60;

/// The longest a session may stay open at Stripe.
const SESSION_LIFETIME_MAX_S: u64 = 24 * 3600 - 60;

/// How long a buyer is told to wait when the provider rate-limits us.
pub const PROVIDER_BUSY_RETRY_MS: u64 = 2_000;

/// One call to the provider's API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCall {
    /// `GET` or `POST`.
    pub post: bool,
    /// `/v1/…`.
    pub path: String,
    /// Form parameters (`a[b][c]` names), in order.
    pub form: Vec<(String, String)>,
    /// For writes: the same key replays the first answer instead of acting twice.
    pub idempotency_key: Option<String>,
}

/// The provider's answer: its status and JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiAnswer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The edge's way to the provider (Spin's outbound HTTP, with the secret key and the version).
pub trait ProviderApi {
    /// Sends `call`; `Err` when no answer came (refused, unreachable, timed out).
    fn call(&self, call: &ApiCall) -> Result<ApiAnswer, String>;
}

/// A Checkout Session, as far as we read it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Session {
    pub id: String,
    /// The hosted page, while the session is open.
    pub url: Option<String>,
    pub status: SessionStatus,
    /// `paid` once the buyer paid.
    pub payment_status: String,
    /// The PaymentIntent (its id, or expanded), once there is one.
    #[serde(default, deserialize_with = "id_or_object")]
    pub payment_intent: Option<String>,
    pub amount_total: Option<i64>,
    pub currency: Option<String>,
    #[serde(default)]
    pub livemode: bool,
}

/// Where a session stands at the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Payable.
    Open,
    /// Paid (or otherwise finished by the buyer).
    Complete,
    /// No longer payable.
    Expired,
}

impl SessionStatus {
    /// As stored.
    pub fn parse(raw: &str) -> Result<Self, crate::sql::DbError> {
        Ok(match raw {
            "open" => SessionStatus::Open,
            "complete" => SessionStatus::Complete,
            "expired" => SessionStatus::Expired,
            other => {
                return Err(crate::sql::DbError::unexpected(format!(
                    "session status {other:?}"
                )));
            }
        })
    }

    /// As stored in `payments.session_status`.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Open => "open",
            SessionStatus::Complete => "complete",
            SessionStatus::Expired => "expired",
        }
    }
}

/// An expandable field: its id, or the object whose `id` it is.
fn id_or_object<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Field {
        Id(String),
        Object { id: String },
    }
    Ok(Option::<Field>::deserialize(d)?.map(|f| match f {
        Field::Id(id) | Field::Object { id } => id,
    }))
}

/// The language of the provider's hosted page: the storefront's, when the buyer's storefront
/// names it, else the buyer's browser's (Stripe's `auto`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CheckoutLocale {
    /// The browser's language, as the provider reads it.
    #[default]
    Auto,
    /// English.
    English,
    /// Simplified Chinese.
    SimplifiedChinese,
}

impl CheckoutLocale {
    /// A storefront language (`web/i18n/{language}.json`: `en` or `zh-CN`); any other value is
    /// `400 bad_query`.
    pub fn parse(language: &str) -> Result<Self, Error> {
        match language {
            "en" => Ok(CheckoutLocale::English),
            "zh-CN" => Ok(CheckoutLocale::SimplifiedChinese),
            _ => Err(Error::invalid(
                ErrorCode::BadQuery,
                "locale must be one of the storefront's languages: en, zh-CN",
            )),
        }
    }

    /// Stripe Checkout's `locale` for it.
    pub fn stripe(self) -> &'static str {
        match self {
            CheckoutLocale::Auto => "auto",
            CheckoutLocale::English => "en",
            CheckoutLocale::SimplifiedChinese => "zh",
        }
    }
}

/// What a new session asks: our payment, its order, the amount we set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession<'a> {
    pub payment_id: &'a str,
    pub order_id: &'a str,
    /// In the currency's smallest unit: the order's own, never the buyer's.
    pub amount: i64,
    /// Lowercase ISO 4217.
    pub currency: &'a str,
    /// What the buyer sees on the provider's page.
    pub product: &'a str,
    /// Where the provider sends the buyer after paying, and if they go back.
    pub success_url: &'a str,
    pub cancel_url: &'a str,
    /// The language the hosted page speaks.
    pub locale: CheckoutLocale,
    /// Unix seconds.
    pub now_s: u64,
    /// The order's deadline, Unix seconds: the session outlives it, so that only our expiry
    /// closes it while the order is open.
    pub deadline_s: u64,
}

/// `POST /v1/checkout/sessions`: a hosted page charging the order's amount; both the session
/// and its PaymentIntent name our payment in their metadata, and our payment id is the
/// idempotency key, so asking again returns the same session.
pub fn create_session(
    api: &(impl ProviderApi + ?Sized),
    new: &NewSession,
) -> Result<Session, Error> {
    let form = [
        ("mode", "payment".to_owned()),
        ("client_reference_id", new.order_id.to_owned()),
        ("metadata[payment_id]", new.payment_id.to_owned()),
        (
            "payment_intent_data[metadata][payment_id]",
            new.payment_id.to_owned(),
        ),
        ("line_items[0][quantity]", "1".to_owned()),
        (
            "line_items[0][price_data][currency]",
            new.currency.to_owned(),
        ),
        (
            "line_items[0][price_data][unit_amount]",
            new.amount.to_string(),
        ),
        (
            "line_items[0][price_data][product_data][name]",
            new.product.to_owned(),
        ),
        ("success_url", new.success_url.to_owned()),
        ("cancel_url", new.cancel_url.to_owned()),
        ("locale", new.locale.stripe().to_owned()),
        ("expires_at", expires_at(new).to_string()),
    ];
    let call = ApiCall {
        post: true,
        path: "/v1/checkout/sessions".to_owned(),
        form: form.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        idempotency_key: Some(format!("session-{}", new.payment_id)),
    };
    answer(api, &call)
}

/// When the provider closes the session by itself: past the deadline, within Stripe's bounds.
fn expires_at(new: &NewSession) -> u64 {
    (new.deadline_s + 60)
        .max(new.now_s + SESSION_LIFETIME_S)
        .min(new.now_s + SESSION_LIFETIME_MAX_S)
}

/// `GET /v1/checkout/sessions/{id}`.
pub fn retrieve_session(api: &(impl ProviderApi + ?Sized), id: &str) -> Result<Session, Error> {
    let call = ApiCall {
        post: false,
        path: format!("/v1/checkout/sessions/{id}"),
        form: Vec::new(),
        idempotency_key: None,
    };
    answer(api, &call)
}

/// `POST /v1/checkout/sessions/{id}/expire`, then what the session is: expired now, or complete
/// if the buyer paid first (the provider refuses to expire a session that is not open, and the
/// session is then retrieved). Once this answers `Expired`, no payment can complete for it.
pub fn expire_session(api: &(impl ProviderApi + ?Sized), id: &str) -> Result<Session, Error> {
    let call = ApiCall {
        post: true,
        path: format!("/v1/checkout/sessions/{id}/expire"),
        form: Vec::new(),
        idempotency_key: Some(format!("expire-{id}")),
    };
    match answer(api, &call) {
        Err(Error::Refused {
            code: ErrorCode::ProviderRefused,
            ..
        }) => retrieve_session(api, id),
        other => other,
    }
}

/// A refund, as far as we read it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Refund {
    pub id: String,
    /// `pending`, `requires_action`, `succeeded`, `failed` or `canceled`.
    pub status: String,
    pub failure_reason: Option<String>,
}

/// `POST /v1/refunds`: pays back the whole of `payment_intent`; `idempotency_key` makes asking
/// again (a lost answer, a retried run) return the same refund.
pub fn create_refund(
    api: &(impl ProviderApi + ?Sized),
    payment_intent: &str,
    reason: Option<&str>,
    idempotency_key: &str,
) -> Result<Refund, Error> {
    let mut form = vec![("payment_intent".to_owned(), payment_intent.to_owned())];
    if let Some(reason) = reason {
        form.push(("reason".to_owned(), reason.to_owned()));
    }
    let call = ApiCall {
        post: true,
        path: "/v1/refunds".to_owned(),
        form,
        idempotency_key: Some(idempotency_key.to_owned()),
    };
    answer(api, &call)
}

/// How much of `payment_intent` was refunded so far, pending refunds included (its latest
/// charge's `amount_refunded`): what a refund call that got no answer may have done.
pub fn refunded_amount(
    api: &(impl ProviderApi + ?Sized),
    payment_intent: &str,
) -> Result<i64, Error> {
    #[derive(Deserialize)]
    struct Intent {
        latest_charge: Option<Charge>,
    }
    #[derive(Deserialize)]
    struct Charge {
        amount_refunded: i64,
    }
    let call = ApiCall {
        post: false,
        path: format!("/v1/payment_intents/{payment_intent}"),
        form: vec![("expand[]".to_owned(), "latest_charge".to_owned())],
        idempotency_key: None,
    };
    let intent: Intent = answer(api, &call)?;
    Ok(intent.latest_charge.map_or(0, |c| c.amount_refunded))
}

/// A page of the provider's events, newest first: each event as sent (a webhook's body), with
/// its id and creation time.
#[derive(Debug, Clone, Default)]
pub struct EventPage {
    pub events: Vec<(String, u64, Vec<u8>)>,
    pub has_more: bool,
}

/// `GET /v1/events?type=…&created[gte]=…`: one page of up to 100 events of `kind` created at
/// or after `since_s`, after event `starting_after` (the list is newest first).
pub fn list_events(
    api: &(impl ProviderApi + ?Sized),
    kind: &str,
    since_s: u64,
    starting_after: Option<&str>,
) -> Result<EventPage, Error> {
    #[derive(Deserialize)]
    struct List {
        data: Vec<serde_json::Value>,
        has_more: bool,
    }
    let mut form = vec![
        ("type".to_owned(), kind.to_owned()),
        ("created[gte]".to_owned(), since_s.to_string()),
        ("limit".to_owned(), "100".to_owned()),
    ];
    if let Some(id) = starting_after {
        form.push(("starting_after".to_owned(), id.to_owned()));
    }
    let call = ApiCall {
        post: false,
        path: "/v1/events".to_owned(),
        form,
        idempotency_key: None,
    };
    let list: List = answer(api, &call)?;
    let events = list
        .data
        .into_iter()
        .map(|e| {
            let id = e["id"].as_str().unwrap_or_default().to_owned();
            let created = e["created"].as_u64().unwrap_or_default();
            let body = serde_json::to_vec(&e).map_err(Error::bug)?;
            Ok((id, created, body))
        })
        .collect::<Result<_, Error>>()?;
    Ok(EventPage {
        events,
        has_more: list.has_more,
    })
}

/// `GET /v1/refunds/{id}`.
pub fn retrieve_refund(api: &(impl ProviderApi + ?Sized), id: &str) -> Result<Refund, Error> {
    let call = ApiCall {
        post: false,
        path: format!("/v1/refunds/{id}"),
        form: Vec::new(),
        idempotency_key: None,
    };
    answer(api, &call)
}

/// Sends `call` and reads a `T`; the provider's errors in our words: a 429 or a lock timeout
/// is "busy, try again soon", a 5xx or no answer is the provider unavailable, any other 4xx is
/// a refusal (`provider_refused`).
fn answer<T: for<'de> Deserialize<'de>>(
    api: &(impl ProviderApi + ?Sized),
    call: &ApiCall,
) -> Result<T, Error> {
    let unavailable = |detail: String| {
        Error::unavailable(
            Dependency::Provider,
            "the payment provider could not be reached; try again",
            detail,
        )
    };
    let answer = api
        .call(call)
        .map_err(|e| unavailable(format!("{}: {e}", call.path)))?;
    let detail = || {
        format!(
            "{} {}: {}",
            answer.status,
            call.path,
            String::from_utf8_lossy(&answer.body)
        )
    };
    match answer.status {
        200..=299 => serde_json::from_slice(&answer.body)
            .map_err(|e| Error::bug(format!("{}: {e}", detail()))),
        429 | 409 => Err(Error::refused_for(
            ErrorCode::ProviderBusy,
            "the payment provider is busy; try again in a moment",
            PROVIDER_BUSY_RETRY_MS,
        )),
        400..=499 => Err(Error::refused(ErrorCode::ProviderRefused, detail())),
        _ => Err(unavailable(detail())),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// Answers each call with the next of `answers`, keeping the calls.
    struct Scripted {
        answers: RefCell<Vec<Result<ApiAnswer, String>>>,
        calls: RefCell<Vec<ApiCall>>,
    }

    impl Scripted {
        fn new(answers: Vec<(u16, &str)>) -> Self {
            Scripted {
                answers: RefCell::new(
                    answers
                        .into_iter()
                        .rev()
                        .map(|(status, body)| {
                            Ok(ApiAnswer {
                                status,
                                body: body.as_bytes().to_vec(),
                            })
                        })
                        .collect(),
                ),
                calls: RefCell::default(),
            }
        }
    }

    impl ProviderApi for Scripted {
        fn call(&self, call: &ApiCall) -> Result<ApiAnswer, String> {
            self.calls.borrow_mut().push(call.clone());
            self.answers
                .borrow_mut()
                .pop()
                .unwrap_or(Err("no more answers".into()))
        }
    }

    const OPEN: &str = r#"{"id":"cs_1","url":"https://checkout.example/c/pay/cs_1","status":"open","payment_status":"unpaid","payment_intent":null,"amount_total":1999,"currency":"eur","livemode":false}"#;
    const COMPLETE: &str = r#"{"id":"cs_1","url":null,"status":"complete","payment_status":"paid","payment_intent":{"id":"pi_1","object":"payment_intent"},"amount_total":1999,"currency":"eur","livemode":false}"#;

    fn new_session() -> NewSession<'static> {
        NewSession {
            payment_id: "pay_1",
            order_id: "0abc",
            amount: 1999,
            currency: "eur",
            product: "Phone",
            success_url: "https://shop.example/ok",
            cancel_url: "https://shop.example/back",
            locale: CheckoutLocale::SimplifiedChinese,
            now_s: 1_000,
            deadline_s: 1_300,
        }
    }

    #[test]
    fn a_session_charges_the_orders_amount_and_names_our_payment_twice() {
        let api = Scripted::new(vec![(200, OPEN)]);
        let s = create_session(&api, &new_session()).unwrap();
        assert_eq!((s.id.as_str(), s.status), ("cs_1", SessionStatus::Open));
        let call = &api.calls.borrow()[0];
        let param = |name: &str| {
            call.form
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(
            param("line_items[0][price_data][unit_amount]"),
            Some("1999")
        );
        assert_eq!(param("metadata[payment_id]"), Some("pay_1"));
        assert_eq!(
            param("payment_intent_data[metadata][payment_id]"),
            Some("pay_1")
        );
        assert_eq!(param("expires_at"), Some("2860"));
        assert_eq!(param("locale"), Some("zh"));
        assert_eq!(call.idempotency_key.as_deref(), Some("session-pay_1"));
    }

    #[test]
    fn the_storefronts_languages_map_to_the_providers_locales_and_nothing_else_parses() {
        assert_eq!(CheckoutLocale::default().stripe(), "auto");
        assert_eq!(CheckoutLocale::parse("en").unwrap().stripe(), "en");
        assert_eq!(CheckoutLocale::parse("zh-CN").unwrap().stripe(), "zh");
        for other in ["", "auto", "zh", "zh-cn", "EN", "fr", "en-US"] {
            let refused = CheckoutLocale::parse(other).unwrap_err();
            assert_eq!(refused.code(), ErrorCode::BadQuery, "{other:?}");
        }
    }

    #[test]
    fn a_session_the_buyer_paid_first_is_not_expired_but_read_back() {
        let refused = r#"{"error":{"type":"invalid_request_error","message":"Only Checkout Sessions with a status in [\"open\"] can be expired."}}"#;
        let api = Scripted::new(vec![(400, refused), (200, COMPLETE)]);
        let s = expire_session(&api, "cs_1").unwrap();
        assert_eq!(s.status, SessionStatus::Complete);
        assert_eq!(s.payment_intent.as_deref(), Some("pi_1"));
        let calls = api.calls.borrow();
        assert_eq!(calls[1].path, "/v1/checkout/sessions/cs_1");
        assert!(!calls[1].post);
    }

    #[test]
    fn rate_limits_are_busy_and_outages_unavailable() {
        let api = Scripted::new(vec![(429, "{}"), (500, "{}")]);
        let busy = create_session(&api, &new_session()).unwrap_err();
        assert_eq!(busy.code(), ErrorCode::ProviderBusy);
        assert!(matches!(
            busy,
            Error::Refused {
                retry_after_ms: Some(PROVIDER_BUSY_RETRY_MS),
                ..
            }
        ));
        assert_eq!(
            create_session(&api, &new_session()).unwrap_err().code(),
            ErrorCode::Unavailable
        );
        assert_eq!(
            create_session(&api, &new_session()).unwrap_err().code(),
            ErrorCode::Unavailable,
            "no answer at all"
        );
    }
}
