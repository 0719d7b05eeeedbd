//! Host conformance: a component that calls every host function the host implements and reports,
//! as JSON, exactly what came back. The native tests (`tests/tests/host_conformance.rs`) assert on
//! the report; the same component can be run under real Spin to compare.
//!
//! Routes (by path): `/conformance/redis`, `/conformance/pg`, `/conformance/variables`,
//! `/conformance/outbound-http`, `/conformance/outbound-echo`, `/conformance/headers` (and `/routes/...`), `/conformance/trap`,
//! `/conformance/slow-incr` (sleeps, then counts itself in Redis: shows a guest outlives its
//! client).

mod pg;

use serde_json::{Value, json};
use spin_sdk::http::{Request, Response};
use spin_sdk::http_component;
use spin_sdk::redis::{Connection, RedisParameter, RedisResult};
use spin_sdk::variables;

/// Dispatches on the path.
#[http_component]
fn handle(req: Request) -> Response {
    let report = match req.path() {
        "/conformance/redis" => redis_report(),
        "/conformance/pg" => pg::run(&var("pg_url"), &var("denied_pg_url")),
        "/conformance/variables" => variables_report(),
        "/conformance/outbound-http" => outbound_http_report(),
        "/conformance/outbound-echo" => outbound_echo(),
        p if p == "/conformance/headers" || p.starts_with("/routes/") => headers_report(&req),
        "/conformance/trap" => panic!("deliberate trap"),
        "/conformance/slow-incr" => slow_incr(),
        other => return Response::new(404, format!("no conformance check at {other}")),
    };
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(report.to_string())
        .build()
}

fn var(name: &str) -> String {
    variables::get(name).unwrap_or_else(|e| panic!("variable {name}: {e}"))
}

/// Debug text of a result, so the test sees exact variants.
fn show<T: std::fmt::Debug, E: std::fmt::Debug>(r: Result<T, E>) -> String {
    match r {
        Ok(v) => format!("Ok({v:?})"),
        Err(e) => format!("Err({e:?})"),
    }
}

fn bin(s: &str) -> RedisParameter {
    RedisParameter::Binary(s.as_bytes().to_vec())
}

fn redis_report() -> Value {
    let conn = match Connection::open(&var("redis_url")) {
        Ok(c) => c,
        Err(e) => return json!({ "open": format!("Err({e:?})") }),
    };
    let exec = |cmd: &str, args: &[RedisParameter]| show(conn.execute(cmd, args));
    // Start from a clean slate so the report is the same on every run.
    let _ = conn.del(&[
        "k".into(),
        "counter".into(),
        "text".into(),
        "set".into(),
        "hash".into(),
    ]);
    let _ = conn.execute("HSET", &[bin("hash"), bin("f"), bin("1")]);
    // json! evaluates its fields in order: the report is also the script of the check.
    let nested = "return {1, 'two', {3, false}, redis.status_reply('OK')}";
    let sha = match conn.execute("SCRIPT", &[bin("LOAD"), bin("return {KEYS[1], ARGV[1]}")]) {
        Ok(v) => match v.as_slice() {
            [RedisResult::Binary(b)] => String::from_utf8_lossy(b).into_owned(),
            other => format!("unexpected {other:?}"),
        },
        Err(e) => format!("Err({e:?})"),
    };
    json!({
        "open": "ok",
        "set": show(conn.set("k", b"v".as_ref())),
        "get": show(conn.get("k").map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))),
        "get_missing": show(conn.get("missing-key")),
        "incr_1": show(conn.incr("counter")),
        "incr_2": show(conn.incr("counter")),
        "set_text": show(conn.set("text", b"not a number".as_ref())),
        "incr_text": show(conn.incr("text")),
        "sadd": show(conn.sadd("set", &["a".into(), "b".into(), "a".into()])),
        "smembers": show(conn.smembers("set").map(|mut m| { m.sort(); m })),
        "srem": show(conn.srem("set", &["a".into(), "z".into()])),
        "sadd_wrong_type": show(conn.sadd("text", &["x".into()])),
        "publish": show(conn.publish("channel", b"payload".as_ref())),
        "execute_set": exec("SET", &[bin("x"), RedisParameter::Int64(5)]),
        "execute_get": exec("GET", &[bin("x")]),
        "execute_nested": exec("EVAL", &[bin(nested), RedisParameter::Int64(0)]),
        "execute_hash": exec("HGETALL", &[bin("hash")]),
        "script_sha": sha.clone(),
        "evalsha": exec("EVALSHA", &[bin(&sha), RedisParameter::Int64(1), bin("key1"), bin("arg1")]),
        "evalsha_unknown": exec("EVALSHA", &[bin("0000000000000000000000000000000000000000"), RedisParameter::Int64(0)]),
        "del": show(conn.del(&["k".into(), "counter".into(), "missing-key".into()])),
        "open_denied": show(Connection::open(&var("denied_redis_url")).map(|_| "connection")),
    })
}

fn slow_incr() -> Value {
    std::thread::sleep(std::time::Duration::from_millis(700));
    let conn = Connection::open(&var("redis_url")).expect("redis");
    json!({ "done": show(conn.incr("slow-incr:done")) })
}

fn variables_report() -> Value {
    json!({
        "present": show(variables::get("present")),
        "defaulted": show(variables::get("defaulted")),
        "missing": show(variables::get("not_declared")),
        "invalid_name": show(variables::get("Bad-Name")),
    })
}

fn outbound_http_report() -> Value {
    let denied = var("denied_http_url");
    let result = spin_sdk::http::run(async move {
        let req = Request::get(denied);
        spin_sdk::http::send::<_, Response>(req)
            .await
            .map(|r| *r.status())
    });
    json!({ "denied": show(result) })
}

/// What the echo server (`echo_url`) answered to a GET: the headers it was sent.
fn outbound_echo() -> Value {
    let url = var("echo_url");
    let result = spin_sdk::http::run(async move {
        spin_sdk::http::send::<_, Response>(Request::get(url))
            .await
            .map(|resp| String::from_utf8_lossy(resp.body()).into_owned())
    });
    match result {
        Ok(body) => serde_json::from_str(&body).unwrap_or(json!(body)),
        Err(e) => json!({ "error": format!("{e:?}") }),
    }
}

fn headers_report(req: &Request) -> Value {
    let spin: serde_json::Map<String, Value> = req
        .headers()
        .filter(|(name, _)| name.starts_with("spin-"))
        .map(|(name, value)| (name.to_owned(), json!(value.as_str().unwrap_or("<binary>"))))
        .collect();
    Value::Object(spin)
}
