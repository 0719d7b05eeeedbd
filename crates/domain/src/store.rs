//! The Redis port: the two commands a script run needs, EVALSHA and EVAL. Spin's Redis
//! interface and the Upstash REST protocol implement it in the guests (`seckill-spin-edge`),
//! redis-rs natively (`seckill-native`), a fake in the unit tests ([`crate::testing`]). What
//! to do with them (EVALSHA, then EVAL only on NOSCRIPT) is written once, in
//! [`crate::scripts::run`].

pub use seckill_redis_reply::Reply;

/// A script's reply, flat; read it with [`crate::scripts::Reader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replies(pub Vec<Reply>);

/// What kind of failure a Redis call met. Each adapter sorts its client's errors into these
/// once, from the client's own error type or Redis's error code, never from free text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// Redis does not hold the script (after a restart or a failover): send its source.
    NoScript,
    /// Redis could not be reached, timed out or was not ready (loading, busy, read-only,
    /// failing over): worth a retry.
    Unavailable,
    /// A script error, or a reply its caller does not expect: our bug, or the data's.
    Failed,
}

impl StoreErrorKind {
    /// The kind of a Redis error reply, from its code (the reply's first word: `NOSCRIPT`,
    /// `LOADING`…), as Redis defines them (<https://redis.io/docs/latest/develop/reference/protocol-spec/#simple-errors>).
    pub fn of_redis_code(code: &str) -> Self {
        match code {
            "NOSCRIPT" => StoreErrorKind::NoScript,
            "LOADING" | "BUSY" | "READONLY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN" | "OOM" => {
                StoreErrorKind::Unavailable
            }
            _ => StoreErrorKind::Failed,
        }
    }
}

/// A failure to reach Redis or run a script (never a business outcome: those are reply codes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("redis: {message}")]
pub struct StoreError {
    /// What kind.
    pub kind: StoreErrorKind,
    /// What happened, in the client's words.
    pub message: String,
}

impl StoreError {
    /// An error of `kind`.
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        StoreError {
            kind,
            message: message.into(),
        }
    }

    /// Redis could not be reached, timed out or is not ready to serve.
    pub fn unreachable(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Unavailable, message)
    }

    /// A script failed or replied with what its caller does not expect.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(StoreErrorKind::Failed, message)
    }

    /// Whether a retry may succeed.
    pub fn is_transient(&self) -> bool {
        self.kind == StoreErrorKind::Unavailable
    }

    /// The same error, its message prefixed with what was being done.
    pub fn context(self, what: &str) -> Self {
        StoreError {
            message: format!("{what}: {}", self.message),
            ..self
        }
    }
}

/// Something that can run a script: EVALSHA and EVAL, nothing else.
pub trait Store {
    /// `EVALSHA sha numkeys keys… args…`.
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError>;

    /// `EVAL source numkeys keys… args…`.
    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError>;
}

/// A borrowed store is a store (the unit tests hand their fakes to [`crate::nodes::Nodes::one`]).
impl<S: Store + ?Sized> Store for &S {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        (**self).evalsha(sha, keys, args)
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        (**self).eval(source, keys, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_error_codes_sort_into_kinds() {
        use StoreErrorKind::*;
        for (code, kind) in [
            ("NOSCRIPT", NoScript),
            ("LOADING", Unavailable),
            ("BUSY", Unavailable),
            ("READONLY", Unavailable),
            ("OOM", Unavailable),
            ("ERR", Failed),
            ("WRONGTYPE", Failed),
            ("noscript", Failed),
        ] {
            assert_eq!(StoreErrorKind::of_redis_code(code), kind, "{code}");
        }
    }
}
