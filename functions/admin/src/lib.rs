//! The operator's API, behind the operators' bearer secrets (`operators`, each with a name and a
//! role, compared in constant time). A viewer may read; every write needs an operator
//! (`403 forbidden` otherwise):
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/admin/events` | every registered event, on every Redis node, archived or not, with its window ([`registry::list`]) |
//! | GET | `/admin/audit?event=&limit=` | who changed what, newest first ([`audit::recent`]) |
//! | PUT | `/admin/events/{id}` | create or update the event ([`admin::upsert_event`]) |
//! | PATCH | `/admin/events/{id}` | live switches and limits ([`admin::set_switches`]) |
//! | GET | `/admin/events/{id}` | state: config, stock per shard, sold, queued… ([`admin::status`]) |
//! | POST | `/admin/events/{id}/warmup` | write stock into shards ([`admin::warm_up`]) |
//! | POST | `/admin/events/{id}/deny` | deny users / addresses ([`admin::deny`]) |
//! | POST | `/admin/events/{id}/draw` | lottery draw ([`admin::draw`]) |
//! | POST / DELETE | `/admin/events/{id}/archive` | archive an ended event / bring it back ([`registry::set_archived`]) |
//! | GET | `/admin/events/{id}/payments?status=&limit=` | its payments, those owing a refund among them ([`orders::payments`]) |
//! | GET | `/admin/events/{id}/versions?limit=` | the config center's history, newest first, each with what it changed ([`versions::list`]) |
//! | POST | `/admin/events/{id}/rollback` | `{"version": n}`: applies version n's configuration again, as a new version |
//! | GET, PUT | `/admin/limits/global` | the global bucket across events ([`global`]) |
//! | GET | `/admin/metrics` | every live event's counters, in Prometheus' text format ([`metrics`]) |
//! | GET | `/admin/whoami` | the operator the bearer secret names, and their role |
//! | … | `/admin/webhooks…` | the order events' endpoints ([`webhooks`]) |
//!
//! Every change of an event's configuration (PUT, PATCH, rollback) is also a version of it in
//! the config center ([`versions`]).
//!
//! Every write an operator (or a viewer) asks of an event is recorded in Postgres with its
//! outcome, after it was applied ([`audit`] says why in that order). When the record cannot be
//! stored, the write is answered as it went, with the header [`AUDIT_HEADER`], and the whole
//! record is logged.

use seckill_domain::admin::{self, DenyList};
use seckill_domain::audit::{self, Entry};
use seckill_domain::error::ErrorCode;
use seckill_domain::event::{EventConfig, EventId, Switches};
use seckill_domain::global_limit::{self, GlobalLimit};
use seckill_domain::versions::{self, Change};
use seckill_domain::{clock, orders, registry};
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, json_body, operator};
use seckill_spin_edge::{config, store};

mod metrics;
mod webhooks;
use serde_json::{Value, json};
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Set on a write's response when its audit record could not be stored (the write happened).
pub const AUDIT_HEADER: &str = "seckill-audit";

/// Authenticate, route, apply, record, render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    match route(&req) {
        Ok(Answer::Read(body)) => http::json(200, &body),
        Ok(Answer::Metrics(text)) => metrics::response(text),
        Ok(Answer::Wrote(entry, outcome)) => recorded(&entry, outcome),
        Err(e) => http::error(&e),
    }
}

/// What a request comes to: a read, Prometheus' text, or a write with its audit entry and
/// outcome.
enum Answer {
    Read(Value),
    Metrics(String),
    Wrote(Box<Entry>, Result<Applied, ApiError>),
}

/// The writes an operator asks of an event.
#[derive(Clone, Copy)]
enum Write {
    Upsert,
    Switches,
    Rollback,
    WarmUp,
    Deny,
    Draw,
    /// Archive (`true`) or bring back.
    Archive(bool),
}

/// A write done: what it answers, and what the audit records of it.
struct Applied {
    status: u16,
    body: Value,
    before: Option<Value>,
    after: Option<Value>,
    /// A change of the event's configuration: the version it makes, and the configuration after.
    version: Option<((Change, Option<i64>), admin::Config)>,
}

impl Applied {
    /// Answered with `body`, which is also what the audit records as after.
    fn returning(body: Value) -> Self {
        Applied {
            status: 200,
            after: Some(body.clone()),
            body,
            before: None,
            version: None,
        }
    }
}

/// One event's routes, `/admin/events/{event_id}[/rest]`, read from the path itself: a client
/// may send `spin-path-match-*` headers of its own, which Spin passes through on the routes
/// without that capture.
fn event_route(path: &str) -> Option<(&str, &str)> {
    let tail = path.strip_prefix("/admin/events/")?;
    let (event, rest) = tail.find('/').map_or((tail, ""), |i| tail.split_at(i));
    (!event.is_empty()).then_some((event, rest))
}

fn route(req: &Request) -> Result<Answer, ApiError> {
    let who = operator(req)?;
    let Some((event, rest)) = event_route(req.path()) else {
        let path = req.path();
        return if path.starts_with("/admin/audit") {
            audit_records(req).map(Answer::Read)
        } else if path.starts_with("/admin/metrics") {
            http::require_method(req, Method::Get)?;
            Ok(Answer::Metrics(metrics::render(
                &store::nodes()?,
                config::postgres().map_err(|e| e.reason()),
                clock::now_ms(),
            )?))
        } else if path.starts_with("/admin/webhooks") {
            webhooks::route(req, &who)
        } else if path.starts_with("/admin/limits/global") {
            global_limit(req, &who)
        } else if path.starts_with("/admin/whoami") {
            http::require_method(req, Method::Get)?;
            Ok(Answer::Read(
                json!({"operator": who.name, "role": who.role.as_str()}),
            ))
        } else {
            list(req).map(Answer::Read)
        };
    };
    let event = EventId::parse(event)?;
    let write = match (req.method(), rest) {
        (Method::Get, "" | "/") => {
            return Ok(Answer::Read(http::to_value(&admin::status(
                &store::nodes()?,
                &event,
            )?)?));
        }
        (Method::Get, "/payments") => return payments(req, &event).map(Answer::Read),
        (Method::Get, "/versions") => return versions(req, &event).map(Answer::Read),
        (Method::Put, "" | "/") => Write::Upsert,
        (Method::Patch, "" | "/") => Write::Switches,
        (Method::Post, "/rollback") => Write::Rollback,
        (Method::Post, "/warmup") => Write::WarmUp,
        (Method::Post, "/deny") => Write::Deny,
        (Method::Post, "/draw") => Write::Draw,
        (Method::Post, "/archive") => Write::Archive(true),
        (Method::Delete, "/archive") => Write::Archive(false),
        (_, "" | "/") => return Err(ApiError::method_not_allowed("GET, PUT, PATCH")),
        (_, "/warmup" | "/deny" | "/draw" | "/rollback") => {
            return Err(ApiError::method_not_allowed("POST"));
        }
        (_, "/payments" | "/versions") => return Err(ApiError::method_not_allowed("GET")),
        (_, "/archive") => return Err(ApiError::method_not_allowed("POST, DELETE")),
        _ => return Err(ApiError::not_found(format!("no admin route {rest}"))),
    };
    let outcome = who
        .may_write()
        .map_err(ApiError::from)
        .and_then(|()| apply(req, &event, write));
    let (status, before, after) = audited(&outcome);
    let entry = Entry::new(
        &who,
        (req.method().to_string().as_str(), req.path()),
        &event,
        (before, after),
        status,
        clock::now_ms(),
    );
    Ok(Answer::Wrote(Box::new(entry), outcome))
}

/// What the audit records of a write's outcome: its status, before and after (the error
/// answered, for a failure).
fn audited(outcome: &Result<Applied, ApiError>) -> (u16, Option<Value>, Option<Value>) {
    match outcome {
        Ok(done) => (done.status, done.before.clone(), done.after.clone()),
        Err(e) => (e.status, None, serde_json::from_str(&e.to_json()).ok()),
    }
}

/// Applies `write`. Bad input is refused before Redis, even when Redis is down (the domain
/// checks again).
fn apply(req: &Request, event: &EventId, write: Write) -> Result<Applied, ApiError> {
    let redis = store::nodes;
    let config_json = |c: Option<admin::Config>| c.map(|c| json!(c));
    match write {
        Write::Upsert => {
            let config: EventConfig = json_body(req)?;
            config.validate()?;
            let done = admin::configure(&redis()?, event, &config)?;
            let change = if done.created {
                Change::Create
            } else {
                Change::Update
            };
            Ok(Applied {
                status: if done.created { 201 } else { 200 },
                body: json!({ "event_id": event.as_str(), "created": done.created, "shards": done.shards }),
                ..configured(done, (change, None))
            })
        }
        Write::Rollback => {
            let to: versions::RollbackTo = json_body(req)?;
            let done = admin::roll_back(&redis()?, &config::postgres()?, event, to.version)?;
            Ok(Applied {
                status: 200,
                body: json!({ "event_id": event.as_str(), "rolled_back_to": to.version, "shards": done.shards }),
                ..configured(done, (Change::Rollback, Some(to.version)))
            })
        }
        Write::Switches => {
            let switches: Switches = json_body(req)?;
            switches.fields()?;
            let changed = admin::set_switches(&redis()?, event, &switches)?;
            Ok(Applied {
                before: config_json(Some(changed.before)),
                after: config_json(Some(changed.after.clone())),
                version: Some(((Change::Switches, None), changed.after)),
                ..Applied::returning(json!({ "event_id": event.as_str(), "updated": true }))
            })
        }
        Write::WarmUp => Ok(Applied::returning(http::to_value(&admin::warm_up(
            &redis()?,
            event,
        )?)?)),
        Write::Deny => {
            let list: DenyList = json_body(req)?;
            admin::check_deny_list(&list)?;
            admin::deny(&redis()?, event, &list)?;
            Ok(Applied {
                after: Some(http::to_value(&list)?),
                ..Applied::returning(json!({ "denied": list.users.len() + list.addrs.len() }))
            })
        }
        Write::Draw => Ok(Applied::returning(json!({
            "admitted": admin::draw(&redis()?, event, admin::DRAW_PAGE)?
        }))),
        Write::Archive(archived) => {
            let was = registry::set_archived(&redis()?, event, archived, clock::now_ms())?;
            Ok(Applied {
                before: Some(json!({ "archived": was })),
                ..Applied::returning(json!({ "event_id": event.as_str(), "archived": archived }))
            })
        }
    }
}

/// What the audit and the config center keep of a configuration written as `change`.
fn configured(done: admin::Configured, change: (Change, Option<i64>)) -> Applied {
    Applied {
        before: done.before.map(|c| json!(c)),
        after: done.after.as_ref().map(|c| json!(c)),
        version: done.after.map(|after| (change, after)),
        ..Applied::returning(Value::Null)
    }
}

/// `GET /admin/events/{id}/payments?status=&limit=`: the event's payments, newest first;
/// `status=refund_due` lists the provider payments that paid nothing (too late, another amount,
/// a second payment for a paid order), which timeout release pays back through the provider
/// (`refund_pending`, then `refunded`).
fn payments(req: &Request, event: &EventId) -> Result<Value, ApiError> {
    let status = match http::query_param(req, "status") {
        None | Some("") => None,
        Some(raw) => Some(orders::PaymentStatus::parse(raw).map_err(|_| {
            ApiError::new(
                ErrorCode::BadQuery,
                "status is pending, succeeded, refund_due, refund_pending or refunded",
            )
        })?),
    };
    let limit = http::limit_param(req, 100, orders::MAX_PAYMENTS_LISTED)?;
    let listed = orders::payments(&config::postgres()?, event, status, limit)?;
    Ok(json!({ "event_id": event.as_str(), "payments": listed }))
}

/// Stores the write's audit record (and, for a change of the configuration, its version) and
/// answers the write as it went. A record that cannot be stored does not undo the write: the
/// answer carries [`AUDIT_HEADER`] and the log the record.
fn recorded(entry: &Entry, outcome: Result<Applied, ApiError>) -> Response {
    let (mut response, version) = match outcome {
        Ok(done) => (http::json(done.status, &done.body), done.version),
        Err(e) => (http::error(&e), None),
    };
    let stored = config::postgres().and_then(|db| {
        let version = version.as_ref().map(|(change, after)| (*change, after));
        Ok(audit::record_write(&db, entry, version)?)
    });
    if let Err(e) = stored {
        let record = serde_json::to_string(entry).unwrap_or_default();
        eprintln!("audit: record not stored ({}): {record}", e.reason());
        response.set_header(AUDIT_HEADER, "not-recorded");
    }
    response
}

/// `GET /admin/events`: the registry of every node, sorted, each event with its archive flag
/// and window (one script per node, then one per event).
fn list(req: &Request) -> Result<Value, ApiError> {
    http::require_method(req, Method::Get)?;
    Ok(json!({ "events": registry::list(&store::nodes()?)? }))
}

/// `GET /admin/audit?event=<id>&limit=<n>`: the newest records (of one event, or of all),
/// newest first; `limit` 1 to [`audit::MAX_LIMIT`], [`audit::DEFAULT_LIMIT`] when absent.
fn audit_records(req: &Request) -> Result<Value, ApiError> {
    http::require_method(req, Method::Get)?;
    let event = http::query_param(req, "event")
        .map(EventId::parse)
        .transpose()?;
    let limit = http::limit_param(req, audit::DEFAULT_LIMIT, audit::MAX_LIMIT)?;
    let records = audit::recent(&config::postgres()?, event.as_ref(), limit)?;
    Ok(json!({ "records": records }))
}

/// `GET /admin/events/{id}/versions?limit=<n>`: the config center's history, newest first, each
/// version with the fields it changed; `limit` 1 to [`versions::MAX_LIMIT`] (default 50).
fn versions(req: &Request, event: &EventId) -> Result<Value, ApiError> {
    let limit = http::limit_param(req, 50, versions::MAX_LIMIT)?;
    let listed = versions::list(&config::postgres()?, event, limit)?;
    Ok(json!({ "event_id": event.as_str(), "versions": listed }))
}

/// `GET /admin/limits/global`: the global bucket and where it is spread; `PUT` sets it
/// (`{"rate": r, "burst": b}`; rate 0 switches it off), an operator's recorded write.
fn global_limit(req: &Request, who: &seckill_domain::auth::Operator) -> Result<Answer, ApiError> {
    let nodes = store::nodes()?;
    match req.method() {
        Method::Get => {
            let limit = global_limit::limit(&nodes)?;
            Ok(Answer::Read(
                json!({ "rate": limit.rate, "burst": limit.burst }),
            ))
        }
        Method::Put => {
            let outcome = who.may_write().map_err(ApiError::from).and_then(|()| {
                let limit: GlobalLimit = json_body(req)?;
                let before = global_limit::limit(&nodes)?;
                let spread = global_limit::set(&nodes, &limit, clock::now_ms())?;
                Ok(Applied {
                    before: Some(json!(before)),
                    ..Applied::returning(http::to_value(&spread)?)
                })
            });
            let (status, before, after) = audited(&outcome);
            let entry = Entry::global(who, req.path(), (before, after), status, clock::now_ms());
            Ok(Answer::Wrote(Box::new(entry), outcome))
        }
        _ => Err(ApiError::method_not_allowed("GET, PUT")),
    }
}
