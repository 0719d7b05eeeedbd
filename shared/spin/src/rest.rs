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
use seckill_shared::scripts::Script;
use seckill_shared::store::{Replies, Reply, Store, StoreError, is_noscript};
use serde_json::Value;
use spin_sdk::http::{Method, Request, Response};

/// An Upstash REST endpoint, as the domain's [`Store`].
pub struct RestStore {
    /// `https://host[:port]/`.
    endpoint: String,
    /// The bearer token.
    token: String,
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
            endpoint: format!("{scheme}://{host}/"),
            token: token.to_owned(),
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
    fn command(&self, label: &str, command: &[&str]) -> Result<Replies, StoreError> {
        let body = serde_json::to_vec(command).map_err(|e| StoreError::failed(e.to_string()))?;
        let request = Request::builder()
            .method(Method::Post)
            .uri(&self.endpoint)
            .header("authorization", format!("Bearer {}", self.token))
            .header("upstash-encoding", "base64")
            .header("content-type", "application/json")
            // A declared length lets the host send head and body in one write (without it,
            // the body streams chunked after the head).
            .header("content-length", body.len().to_string())
            .body(body)
            .build();
        // Store is synchronous; the outbound request is driven to completion right here.
        let response: Response = spin_sdk::http::run(spin_sdk::http::send(request))
            .map_err(|e| StoreError::unreachable(format!("{label}: REST request: {e}")))?;
        reply(label, *response.status(), response.body())
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
        // Redis refused the command: the same sorting as a Redis error (LOADING, BUSY… are
        // transient; a script error is not).
        400 => {
            let error = field("error")
                .and_then(Value::as_str)
                .unwrap_or("bad request");
            Err(StoreError::from_message(format!("{name}: {error}")))
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
    fn run(
        &self,
        script: &Script,
        keys: &[String],
        args: &[String],
    ) -> Result<Replies, StoreError> {
        let count = keys.len().to_string();
        let mut words: Vec<&str> = vec!["EVALSHA", script.sha, &count];
        words.extend(keys.iter().chain(args).map(String::as_str));
        match self.command(script.name, &words) {
            Err(e) if is_noscript(&e.message) => {
                words[..2].copy_from_slice(&["EVAL", script.source]);
                self.command(script.name, &words)
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_carry_the_token() {
        let s = RestStore::open("https://tok3n@db.upstash.io").unwrap();
        assert_eq!(
            (s.endpoint.as_str(), s.token.as_str()),
            ("https://db.upstash.io/", "tok3n")
        );
        let s = RestStore::open("https://t@localhost:8443/").unwrap();
        assert_eq!(s.endpoint, "https://localhost:8443/");
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
        let noscript = reply("t", 400, br#"{"error": "NOSCRIPT No matching script"}"#);
        assert!(is_noscript(&noscript.unwrap_err().message));
        let busy = reply("t", 400, br#"{"error": "BUSY Redis is busy"}"#).unwrap_err();
        assert!(busy.transient);
        let script_error = reply("t", 400, br#"{"error": "ERR user_script:1"}"#).unwrap_err();
        assert!(!script_error.transient);
        assert!(reply("t", 401, b"Unauthorized").unwrap_err().transient);
        assert!(reply("t", 503, b"").unwrap_err().transient);
        assert!(!reply("t", 404, b"").unwrap_err().transient);
        assert!(
            !reply("t", 200, br#"{"result": 1.5}"#)
                .unwrap_err()
                .transient
        );
    }
}
