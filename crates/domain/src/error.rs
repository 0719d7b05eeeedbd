//! The domain's error: what went wrong, in the domain's words, with no HTTP in it. Every error
//! carries a stable `code` (`snake_case`) clients may switch on; the Spin edge maps each code to
//! its HTTP status in one table (`seckill_spin_edge::error`).

/// A dependency of the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependency {
    /// The sale's Redis (a node of it).
    Redis,
    /// The orders database.
    Postgres,
}

/// Why an operation did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The input is malformed or out of range; nothing changed.
    #[error("{code}: {message}")]
    Invalid {
        /// Stable identifier.
        code: &'static str,
        /// For humans.
        message: String,
    },
    /// A well-formed request the sale's rules refuse (sold out, too early, not yours…).
    #[error("{code}: {message}")]
    Refused {
        /// Stable identifier.
        code: &'static str,
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
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            code,
            message: message.into(),
        }
    }

    /// A refusal by the sale's rules.
    pub fn refused(code: &'static str, message: impl Into<String>) -> Self {
        Error::Refused {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// A refusal that may succeed after `ms`.
    pub fn refused_for(code: &'static str, message: impl Into<String>, ms: u64) -> Self {
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
    pub fn code(&self) -> &'static str {
        match self {
            Error::Invalid { code, .. } | Error::Refused { code, .. } => code,
            Error::Unavailable { .. } => "unavailable",
            Error::Bug { .. } => "internal",
        }
    }

    /// What an operator's report shows: the dependency's words when there are some.
    pub fn reason(&self) -> String {
        match self {
            Error::Invalid { message, .. } | Error::Refused { message, .. } => message.clone(),
            Error::Unavailable { detail, .. } | Error::Bug { detail } => detail.clone(),
        }
    }
}
