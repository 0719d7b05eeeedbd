//! The Redis port over Upstash's REST protocol, through Spin's outbound HTTP, which Spin pools
//! across requests from v3.4 (a buy stays one request over a kept-alive connection, where
//! `rediss://` costs a TCP and TLS handshake per request).
//!
//! The protocol subset relied on, and nothing more:
//! - `POST <base>/` with a JSON array of strings, one command (`["EVALSHA", sha, n, keys…,
//!   args…]`, then `["EVAL", source, …]` when the reply is `NOSCRIPT`);
//! - `Authorization: Bearer <token>`; `Upstash-Encoding: base64` (every string in the result is
//!   base64, so any bytes survive JSON);
//! - `200 {"result": …}` (null, integer, string, or nested arrays of them), `400 {"error": "…"}`
//!   for a command Redis refused, `401` for a bad token.
//!
//! Never `/pipeline` (not atomic): one script call is one command. The URL is
//! `https://<token>@<host>[:<port>]`, so `redis_url` (a secret) carries the token, and a list of
//! databases (one token each) works like a list of Redis nodes.

use base64::Engine as _;
use seckill_domain::store::{Replies, Reply, Store, StoreError, StoreErrorKind};
use serde_json::Value;

use crate::outbound;

/// An Upstash REST endpoint, as the domain's [`Store`].
pub struct RestStore {
    /// `https`, or `http` for a local stand-in.
    https: bool,
    /// `host[:port]`.
    authority: String,
    /// `Bearer <token>`, the `authorization` header's value.
    bearer: String,
}

impl RestStore {
    /// Reads `https://<token>@<host>[:<port>]` (or `http://` for a local stand-in).
    pub fn open(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .filter(|(s, _)| *s == "https" || *s == "http")
            .ok_or("a REST Redis URL starts with https://")?;
        let (token, host) = rest
            .split_once('@')
            .ok_or("a REST Redis URL carries its token: https://<token>@<host>")?;
        let host = host.trim_end_matches('/');
        if token.is_empty() || host.is_empty() || host.contains('/') {
            return Err("a REST Redis URL is https://<token>@<host>[:<port>]".into());
        }
        Ok(RestStore {
            https: scheme == "https",
            authority: host.to_owned(),
            bearer: format!("Bearer {token}"),
        })
    }

    /// `PING`, for the health check.
    pub fn ping(&self) -> Result<(), StoreError> {
        match self.command("PING", &["PING"])?.0.as_slice() {
            [Reply::Bytes(b)] if b == b"PONG" => Ok(()),
            other => Err(StoreError::failed(format!("PING: {other:?}"))),
        }
    }

    /// Sends one command (`label` names it in errors); its result flattened as Spin flattens a
    /// Redis reply.
    fn command<S: serde::Serialize>(
        &self,
        label: &str,
        command: &[S],
    ) -> Result<Replies, StoreError> {
        let body = serde_json::to_vec(command).map_err(|e| StoreError::failed(e.to_string()))?;
        let (status, body) = self
            .post(&body)
            .map_err(|e| StoreError::unreachable(format!("{label}: REST request: {e}")))?;
        reply(label, status, &body)
    }

    /// One `POST /` of `body`: the status and the whole response body.
    fn post(&self, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        outbound::send(&outbound::Outbound {
            https: self.https,
            authority: &self.authority,
            post: true,
            path: "/",
            headers: &[
                ("authorization", self.bearer.as_bytes()),
                ("upstash-encoding", b"base64"),
                ("content-type", b"application/json"),
            ],
            body,
        })
    }
}

/// Reads a REST response the way its Redis counterpart would read.
fn reply(name: &str, status: u16, body: &[u8]) -> Result<Replies, StoreError> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let field = |key: &str| json.as_ref().and_then(|j| j.get(key));
    match status {
        200 => {
            let result = field("result")
                .ok_or_else(|| StoreError::failed(format!("{name}: a 200 without a result")))?;
            let mut replies = Vec::new();
            flatten(result, &mut replies)
                .map_err(|e| StoreError::failed(format!("{name}: {e}")))?;
            Ok(Replies(replies))
        }
        // Redis refused the command: Upstash passes Redis's error text, whose first word is
        // its code (NOSCRIPT, LOADING, ERR…).
        400 => {
            let error = field("error")
                .and_then(Value::as_str)
                .unwrap_or("bad request");
            let code = error.split(' ').next().unwrap_or_default();
            Err(StoreError::new(
                StoreErrorKind::of_redis_code(code),
                format!("{name}: {error}"),
            ))
        }
        // A bad token, like a refused AUTH, or a database over its limits or down: not now.
        401 | 403 | 408 | 429 | 500..=599 => Err(StoreError::unreachable(format!(
            "{name}: REST endpoint answered {status}"
        ))),
        _ => Err(StoreError::failed(format!(
            "{name}: REST endpoint answered {status}"
        ))),
    }
}

/// Spin's flattening (`factor-outbound-redis/src/host.rs`): arrays recursively, `null` as nil,
/// integers as they are, strings as bytes.
fn flatten(value: &Value, out: &mut Vec<Reply>) -> Result<(), String> {
    match value {
        Value::Null => out.push(Reply::Nil),
        Value::Number(n) => out.push(Reply::Int(
            n.as_i64().ok_or_else(|| format!("not an integer: {n}"))?,
        )),
        Value::String(s) => out.push(Reply::Bytes(
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| format!("not base64: {e}"))?,
        )),
        Value::Array(items) => {
            for item in items {
                flatten(item, out)?;
            }
        }
        other => return Err(format!("unexpected reply: {other}")),
    }
    Ok(())
}

impl Store for RestStore {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        self.command("EVALSHA", &eval_words("EVALSHA", sha, keys, args))
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        self.command("EVAL", &eval_words("EVAL", source, keys, args))
    }
}

/// `[command, first, numkeys, keys…, args…]`, the JSON array the REST API takes.
fn eval_words<'a>(
    command: &'a str,
    first: &'a str,
    keys: &'a [String],
    args: &'a [String],
) -> Vec<std::borrow::Cow<'a, str>> {
    let mut words = vec![command.into(), first.into(), keys.len().to_string().into()];
    words.extend(keys.iter().chain(args).map(|s| s.as_str().into()));
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_carry_the_token() {
        let s = RestStore::open("https://tok3n@db.upstash.io").unwrap();
        assert_eq!(
            (s.https, s.authority.as_str(), s.bearer.as_str()),
            (true, "db.upstash.io", "Bearer tok3n")
        );
        let s = RestStore::open("http://t@localhost:8443/").unwrap();
        assert_eq!((s.https, s.authority.as_str()), (false, "localhost:8443"));
        for bad in [
            "https://db.upstash.io",
            "redis://t@h",
            "https://@h",
            "https://t@h/x",
        ] {
            assert!(RestStore::open(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn replies_flatten_like_spin() {
        let body = br#"{"result": [1, null, "b2s=", [2, ["Zm9v"]]]}"#;
        let replies = reply("t", 200, body).unwrap();
        assert_eq!(
            replies.0,
            vec![
                Reply::Int(1),
                Reply::Nil,
                Reply::Bytes(b"ok".to_vec()),
                Reply::Int(2),
                Reply::Bytes(b"foo".to_vec()),
            ]
        );
    }

    #[test]
    fn errors_sort_like_their_redis_counterparts() {
        use StoreErrorKind::*;
        let kind = |status, body: &[u8]| reply("t", status, body).unwrap_err().kind;
        assert_eq!(
            kind(400, br#"{"error": "NOSCRIPT No matching script"}"#),
            NoScript
        );
        assert_eq!(
            kind(400, br#"{"error": "BUSY Redis is busy"}"#),
            Unavailable
        );
        assert_eq!(kind(400, br#"{"error": "ERR user_script:1"}"#), Failed);
        assert_eq!(kind(401, b"Unauthorized"), Unavailable);
        assert_eq!(kind(503, b""), Unavailable);
        assert_eq!(kind(404, b""), Failed);
        assert_eq!(kind(200, br#"{"result": 1.5}"#), Failed);
    }
}
