//! The Redis port: running a script, one EVALSHA per operation, EVAL only when Redis answers
//! NOSCRIPT (after a restart or a failover). Spin's Redis interface implements it in the guests
//! (`seckill-spin-edge`), redis-rs natively (`seckill-native`).

use crate::scripts::Script;

/// One element of a script's reply (Spin flattens nested arrays, so replies are flat lists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Lua `false` / missing.
    Nil,
    /// Lua number.
    Int(i64),
    /// Lua string.
    Bytes(Vec<u8>),
    /// Status reply.
    Status(String),
}

/// A failure to reach Redis or run a script (never a business outcome: those are reply codes).
#[derive(Debug, thiserror::Error)]
#[error("redis: {message}")]
pub struct StoreError {
    /// Whether Redis could not be reached, timed out or was not ready (worth a retry), as
    /// opposed to a script or reply that is wrong (our bug, or the data's).
    pub transient: bool,
    /// What happened.
    pub message: String,
}

impl StoreError {
    /// Redis could not be reached, timed out or is not ready to serve.
    pub fn unreachable(message: impl Into<String>) -> Self {
        StoreError {
            transient: true,
            message: message.into(),
        }
    }

    /// A script failed or replied with what its caller does not expect.
    pub fn failed(message: impl Into<String>) -> Self {
        StoreError {
            transient: false,
            message: message.into(),
        }
    }

    /// Sorts an error text from a Redis client: server errors that mean "not now" (loading,
    /// busy with a script, read-only replica, out of memory, failing over) and I/O failures
    /// are transient; anything else (`ERR` in a script, `WRONGTYPE`) is a failure.
    pub fn from_message(message: impl Into<String>) -> Self {
        const TRANSIENT: [&str; 14] = [
            "LOADING",
            "BUSY",
            "READONLY",
            "MASTERDOWN",
            "TRYAGAIN",
            "CLUSTERDOWN",
            "OOM",
            "os error",
            "onnection",
            "timed out",
            "roken pipe",
            "reset by peer",
            "EOF",
            "I/O",
        ];
        let message = message.into();
        if TRANSIENT.iter().any(|t| message.contains(t)) {
            Self::unreachable(message)
        } else {
            Self::failed(message)
        }
    }
}

/// Something that can run a script.
pub trait Store {
    /// Runs `script` with `keys` and `args`.
    fn run(&self, script: &Script, keys: &[String], args: &[String])
    -> Result<Replies, StoreError>;
}

/// Whether an error message is Redis's NOSCRIPT (as redis-rs or the server words it).
pub fn is_noscript(message: &str) -> bool {
    message.contains("NOSCRIPT") || message.contains("NoScriptError")
}

/// A script's reply, flat; read it with [`crate::scripts::Reader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replies(pub Vec<Reply>);
