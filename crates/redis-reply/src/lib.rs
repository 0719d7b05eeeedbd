//! A Redis script's reply as Spin's `fermyon:spin/redis` gives it to a guest: a flat list of
//! values. The domain reads replies as [`Reply`]s; the host (serving that interface) and the
//! native adapter (redis-rs without WASM) turn redis-rs values into them with [`flatten`], so
//! a script's reply reads the same in and out of WASM.

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

/// Reply elements from plain values, as a Lua script returns them: `[0.into(), "x".into()]`.
impl From<i64> for Reply {
    fn from(v: i64) -> Self {
        Reply::Int(v)
    }
}

impl From<&str> for Reply {
    fn from(v: &str) -> Self {
        Reply::Bytes(v.as_bytes().to_vec())
    }
}

/// A redis-rs value as Spin's Redis interface flattens it (`from_redis_value` in
/// `crates/factor-outbound-redis/src/host.rs`, spinframework/spin v3.6.3): arrays and sets
/// flattened recursively into one list; a double or big number as its decimal text, a boolean
/// as 1 or 0; a map, attribute, verbatim string or push is refused, as is a server error, with
/// their text.
#[cfg(feature = "redis")]
pub fn flatten(value: redis::Value) -> Result<Vec<Reply>, String> {
    fn push(out: &mut Vec<Reply>, value: redis::Value) -> Result<(), String> {
        use redis::Value;
        match value {
            Value::Nil => out.push(Reply::Nil),
            Value::Int(v) => out.push(Reply::Int(v)),
            Value::BulkString(b) => out.push(Reply::Bytes(b)),
            Value::SimpleString(s) => out.push(Reply::Status(s)),
            Value::Okay => out.push(Reply::Status("OK".to_owned())),
            Value::Array(items) | Value::Set(items) => {
                for item in items {
                    push(out, item)?;
                }
            }
            Value::Double(d) => out.push(Reply::Bytes(d.to_string().into_bytes())),
            Value::BigNumber(n) => out.push(Reply::Bytes(n.to_string().into_bytes())),
            Value::Boolean(b) => out.push(Reply::Int(i64::from(b))),
            Value::ServerError(e) => return Err(format!("{e:?}")),
            other => return Err(format!("unsupported Redis reply type: {other:?}")),
        }
        Ok(())
    }
    let mut out = Vec::new();
    push(&mut out, value)?;
    Ok(out)
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;

    /// Spin's `RedisResults` conversion: nested arrays and sets flattened, a double and a big
    /// number as text, a boolean as 1 or 0, a map refused.
    #[test]
    fn replies_flatten_as_spin_flattens_them() {
        let reply = redis::Value::Array(vec![
            redis::Value::Int(1),
            redis::Value::Set(vec![redis::Value::BulkString(b"two".to_vec())]),
            redis::Value::Array(vec![redis::Value::Double(2.5), redis::Value::Nil]),
            redis::Value::Boolean(true),
            redis::Value::Okay,
        ]);
        assert_eq!(
            flatten(reply).unwrap(),
            vec![
                Reply::Int(1),
                Reply::Bytes(b"two".to_vec()),
                Reply::Bytes(b"2.5".to_vec()),
                Reply::Nil,
                Reply::Int(1),
                Reply::Status("OK".to_owned()),
            ]
        );
        assert!(flatten(redis::Value::Map(vec![])).is_err());
    }
}
