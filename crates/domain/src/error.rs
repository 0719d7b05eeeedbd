//! The domain's error: what went wrong, in the domain's words, with no HTTP in it. Every error
//! carries a stable [`ErrorCode`] clients may switch on; the Spin edge gives each code its HTTP
//! status in one exhaustive match (`seckill_spin_edge::error::status_of`), and a test holds the
//! list against `api/openapi.yaml`'s `ErrorCode`.

use crate::sql::DbError;
use crate::store::StoreError;

/// Declares [`ErrorCode`] once: each variant with its wire name, and the list of them all.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $wire:literal,)*) => {
        /// Every code an error response carries (`{"error": {"code": ...}}`): the one list.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The stable wire name (`snake_case`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)*
                }
            }
        }
    };
}

error_codes! {
    /// The body is not the expected JSON.
    MalformedJson = "malformed_json",
    /// The event id is not 1–64 of `[A-Za-z0-9_-]`.
    BadEventId = "bad_event_id",
    /// Admin: a configuration value out of range, or nothing to change.
    InvalidConfig = "invalid_config",
    /// Admin: a deny list with no entries, more than 50 in a list, or an entry that is neither
    /// a user id nor an IP address or CIDR range.
    InvalidDenyList = "invalid_deny_list",
    /// Admin: an order events endpoint that is not an `https` URL of a public host, or a
    /// description too long.
    InvalidEndpoint = "invalid_endpoint",
    /// Pay: the order id is not 1–64 hex digits.
    BadOrderId = "bad_order_id",
    /// A query parameter out of range.
    BadQuery = "bad_query",
    /// The request body could not be read.
    UnreadableBody = "unreadable_body",
    /// Demo login: not a valid user name.
    BadUserId = "bad_user_id",
    /// Bearer token missing or invalid, or a wrong job key.
    Unauthorized = "unauthorized",
    /// Admin: a viewer asked for a write (viewers may only read).
    Forbidden = "forbidden",
    /// Precheck: no valid admission token.
    NotAdmitted = "not_admitted",
    /// On a deny list.
    Denied = "denied",
    /// Lottery: drawn, not selected.
    NotSelected = "not_selected",
    /// Buy: purchase token missing, used, expired or not yours.
    BadPurchaseToken = "bad_purchase_token",
    /// No such event.
    EventNotFound = "event_not_found",
    /// Pay: no such order of the caller's.
    OrderNotFound = "order_not_found",
    /// No such route or resource.
    NotFound = "not_found",
    /// Demo login: switched off.
    DemoLoginOff = "demo_login_off",
    /// The route does not take this method.
    MethodNotAllowed = "method_not_allowed",
    /// The user already has an order for this event.
    AlreadyBought = "already_bought",
    /// Pay: the payment window has closed.
    OrderExpired = "order_expired",
    /// The change conflicts with the current state.
    Conflict = "conflict",
    /// Nothing left to buy.
    SoldOut = "sold_out",
    /// After the end.
    SaleEnded = "sale_ended",
    /// Every admission token is handed out.
    AdmissionClosed = "admission_closed",
    /// The body is over the limit.
    BodyTooLarge = "body_too_large",
    /// Before the start.
    TooEarly = "too_early",
    /// Admission: before the event's admission opening.
    AdmissionNotOpen = "admission_not_open",
    /// Admission: the proof-of-work challenge is forged, expired, someone else's, or its
    /// solution does not have the challenge's difficulty.
    BadChallenge = "bad_challenge",
    /// Admission: no proof of work, or one below the event's difficulty now: solve a new
    /// challenge.
    ChallengeRequired = "challenge_required",
    /// Admission: this solved challenge was used already.
    ChallengeUsed = "challenge_used",
    /// Payment webhook: the provider's signature is missing, malformed, wrong or outside the
    /// tolerance.
    BadSignature = "bad_signature",
    /// Precheck: the gray release does not let this user in yet.
    NotReleased = "not_released",
    /// A token bucket is empty.
    RateLimited = "rate_limited",
    /// Switched off, or not warmed up yet.
    SalePaused = "sale_paused",
    /// Redis, Postgres or the payment provider could not be reached, timed out or was not
    /// ready.
    Unavailable = "unavailable",
    /// Pay: the payment provider is rate limiting us; try again after `Retry-After`.
    ProviderBusy = "provider_busy",
    /// Pay: the payment provider refused our request (its words in the message).
    ProviderRefused = "provider_refused",
    /// Our fault, or data a dependency refuses.
    Internal = "internal",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dependency of the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependency {
    /// The sale's Redis (a node of it).
    Redis,
    /// The orders database.
    Postgres,
    /// The payment provider's API.
    Provider,
}

/// Why an operation did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input is malformed or out of range; nothing changed.
    #[error("{code}: {message}")]
    Invalid {
        /// Stable identifier.
        code: ErrorCode,
        /// For humans.
        message: String,
    },
    /// A well-formed request the sale's rules refuse (sold out, too early, not yours…).
    #[error("{code}: {message}")]
    Refused {
        /// Stable identifier.
        code: ErrorCode,
        /// For humans.
        message: String,
        /// When trying again makes sense (too early, rate limited, paused).
        retry_after_ms: Option<u64>,
    },
    /// Redis or Postgres could not be reached, timed out or was not ready: try again.
    #[error("unavailable: {message} ({detail})")]
    Unavailable {
        /// Which one.
        dependency: Dependency,
        /// For humans.
        message: String,
        /// The dependency's own words, for the log.
        detail: String,
    },
    /// Our bug, or data a dependency refuses: no retry fixes it.
    #[error("internal: {detail}")]
    Bug {
        /// What happened, for the log.
        detail: String,
    },
}

impl Error {
    /// Malformed or out-of-range input.
    pub fn invalid(code: ErrorCode, message: impl Into<String>) -> Self {
        Error::Invalid {
            code,
            message: message.into(),
        }
    }

    /// A refusal by the sale's rules.
    pub fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        Error::Refused {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// A refusal that may succeed after `ms`.
    pub fn refused_for(code: ErrorCode, message: impl Into<String>, ms: u64) -> Self {
        Error::Refused {
            code,
            message: message.into(),
            retry_after_ms: Some(ms),
        }
    }

    /// `dependency` is down; `detail` is its own account.
    pub fn unavailable(
        dependency: Dependency,
        message: impl Into<String>,
        detail: impl std::fmt::Display,
    ) -> Self {
        Error::Unavailable {
            dependency,
            message: message.into(),
            detail: detail.to_string(),
        }
    }

    /// Our fault, or the data's.
    pub fn bug(detail: impl std::fmt::Display) -> Self {
        Error::Bug {
            detail: detail.to_string(),
        }
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Invalid { code, .. } | Error::Refused { code, .. } => *code,
            Error::Unavailable { .. } => ErrorCode::Unavailable,
            Error::Bug { .. } => ErrorCode::Internal,
        }
    }

    /// Whether a retry may succeed: a dependency that could not be reached or was not ready.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }

    /// What an operator's report shows: the dependency's words when there are some.
    pub fn reason(&self) -> String {
        match self {
            Error::Invalid { message, .. } | Error::Refused { message, .. } => message.clone(),
            Error::Unavailable { detail, .. } | Error::Bug { detail } => detail.clone(),
        }
    }
}

/// A Redis failure: transient ones are the sale being busy (a 503 with a retry), the rest bugs.
impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        if e.is_transient() {
            Error::unavailable(Dependency::Redis, "the sale is busy; try again", e)
        } else {
            Error::bug(e)
        }
    }
}

/// A Postgres failure: a lost connection is the orders database unavailable, the rest bugs.
impl From<DbError> for Error {
    fn from(e: DbError) -> Self {
        if e.connection {
            Error::unavailable(
                Dependency::Postgres,
                "orders database unavailable; try again",
                e,
            )
        } else {
            Error::bug(e)
        }
    }
}
