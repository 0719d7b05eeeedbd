//! The order events' endpoints (`/admin/webhooks`): the shop's systems that get every order's
//! events, signed ([`endpoints`]). Reads for viewers, writes for operators, every write in the
//! audit. A secret is answered once, when it is made, and never recorded.
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/admin/webhooks` | every endpoint and how its deliveries go |
//! | POST | `/admin/webhooks` | `{"url", "description"}`: registers one, `201` with its secret |
//! | GET | `/admin/webhooks/{id}` | one endpoint |
//! | DELETE | `/admin/webhooks/{id}` | removes it and its log |
//! | POST | `/admin/webhooks/{id}/rotate` | a new secret; the old one signs beside it for a day |
//! | POST | `/admin/webhooks/{id}/disable`, `/enable` | stops or restarts its deliveries |
//! | POST | `/admin/webhooks/{id}/replay` | `{"msg_id"}` or `{"from_ms", "to_ms"}`: sends again |
//! | GET | `/admin/webhooks/{id}/deliveries?limit=` | its delivery log, newest first |

use seckill_domain::audit::Entry;
use seckill_domain::auth::Operator;
use seckill_domain::clock;
use seckill_domain::order_events::endpoints::{self, NewEndpoint, ReplayRequest};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, json_body};
use serde_json::json;
use spin_sdk::http::{Method, Request};

use crate::{Answer, Applied, audited};

/// The most log entries one read gives.
const MAX_LOG: u32 = 500;

/// `/admin/webhooks[/{id}[/rest]]`.
pub fn route(req: &Request, who: &Operator) -> Result<Answer, ApiError> {
    let tail = req.path().strip_prefix("/admin/webhooks").unwrap_or("");
    let tail = tail.strip_prefix('/').unwrap_or(tail);
    let (id, rest) = tail.split_once('/').unwrap_or((tail, ""));
    let db = || config::postgres();
    let write = match (req.method(), id, rest) {
        (Method::Get, "", "") => {
            let db = db()?;
            let (list, backlog) = (
                endpoints::list(&db)?,
                endpoints::backlog(&db, clock::now_ms())?,
            );
            return Ok(Answer::Read(
                json!({ "endpoints": list, "backlog": backlog }),
            ));
        }
        (Method::Get, id, "") => {
            return Ok(Answer::Read(http::to_value(&endpoints::get(&db()?, id)?)?));
        }
        (Method::Get, id, "deliveries") => {
            let limit = http::limit_param(req, 100, MAX_LOG)?;
            let log = endpoints::deliveries(&db()?, id, limit)?;
            return Ok(Answer::Read(json!({ "deliveries": log })));
        }
        (Method::Post, "", "") => Write::Register,
        (Method::Delete, id, "") if !id.is_empty() => Write::Remove,
        (Method::Post, id, "rotate") if !id.is_empty() => Write::Rotate,
        (Method::Post, id, "disable") if !id.is_empty() => Write::Enable(false),
        (Method::Post, id, "enable") if !id.is_empty() => Write::Enable(true),
        (Method::Post, id, "replay") if !id.is_empty() => Write::Replay,
        (_, "", "") => return Err(ApiError::method_not_allowed("GET, POST")),
        (_, _, "") => return Err(ApiError::method_not_allowed("GET, DELETE")),
        (_, _, "deliveries") => return Err(ApiError::method_not_allowed("GET")),
        (_, _, "rotate" | "disable" | "enable" | "replay") => {
            return Err(ApiError::method_not_allowed("POST"));
        }
        _ => {
            return Err(ApiError::not_found(format!(
                "no admin route {}",
                req.path()
            )));
        }
    };
    let outcome = who
        .may_write()
        .map_err(ApiError::from)
        .and_then(|()| apply(req, id, write));
    let (status, before, after) = audited(&outcome);
    let entry = Entry::unscoped(
        who,
        (req.method().to_string().as_str(), req.path()),
        (before, after),
        status,
        clock::now_ms(),
    );
    Ok(Answer::Wrote(Box::new(entry), outcome))
}

#[derive(Clone, Copy)]
enum Write {
    Register,
    Remove,
    Rotate,
    Enable(bool),
    Replay,
}

fn apply(req: &Request, id: &str, write: Write) -> Result<Applied, ApiError> {
    let now = clock::now_ms();
    match write {
        Write::Register => {
            let new: NewEndpoint = json_body(req)?;
            let made = endpoints::register(&config::postgres()?, &new.url, &new.description, now)?;
            Ok(with_secret(201, made))
        }
        Write::Rotate => Ok(with_secret(
            200,
            endpoints::rotate(&config::postgres()?, id, now)?,
        )),
        Write::Enable(on) => {
            let db = config::postgres()?;
            let before = http::to_value(&endpoints::get(&db, id)?)?;
            let after = http::to_value(&endpoints::set_enabled(&db, id, on, now)?)?;
            Ok(Applied {
                before: Some(before),
                ..Applied::returning(after)
            })
        }
        Write::Remove => {
            let db = config::postgres()?;
            let before = http::to_value(&endpoints::get(&db, id)?)?;
            endpoints::remove(&db, id)?;
            Ok(Applied {
                before: Some(before),
                ..Applied::returning(json!({ "removed": id }))
            })
        }
        Write::Replay => {
            let what = json_body::<ReplayRequest>(req)?.replay()?;
            let queued = endpoints::replay(&config::postgres()?, id, &what)?;
            Ok(Applied::returning(json!({ "queued": queued })))
        }
    }
}

/// A made secret is answered, but the audit records the endpoint alone.
fn with_secret(status: u16, made: endpoints::Registered) -> Applied {
    let endpoint = json!(made.endpoint);
    Applied {
        status,
        body: json!({ "endpoint": endpoint, "secret": made.secret }),
        before: None,
        after: Some(endpoint),
        version: None,
    }
}
