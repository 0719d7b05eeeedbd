//! The operator's API, behind a bearer secret (`admin_token`, compared in constant time):
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/admin/events` | every registered event, on every Redis node ([`registry::events`]) |
//! | PUT | `/admin/events/{id}` | create or update the event ([`admin::upsert_event`]) |
//! | PATCH | `/admin/events/{id}` | live switches and limits ([`admin::set_switches`]) |
//! | GET | `/admin/events/{id}` | state: config, stock per shard, sold, queued… ([`admin::status`]) |
//! | POST | `/admin/events/{id}/warmup` | write stock into shards ([`admin::warm_up`]) |
//! | POST | `/admin/events/{id}/deny` | deny users / addresses ([`admin::deny`]) |
//! | POST | `/admin/events/{id}/draw` | lottery draw ([`admin::draw`]) |

use seckill_domain::admin::{self, DenyList};
use seckill_domain::event::{EventConfig, Switches};
use seckill_domain::registry;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, event_id, json_body, operator};
use seckill_spin_edge::store;
use serde_json::json;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Authenticate, route, apply, render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    match route(&req) {
        Ok((status, body)) => http::json(status, &body),
        Err(e) => http::error(&e),
    }
}

fn route(req: &Request) -> Result<(u16, serde_json::Value), ApiError> {
    operator(req)?;
    if req.header("spin-path-match-event-id").is_none() {
        return list(req);
    }
    let event = event_id(req)?;
    let rest = req
        .header("spin-path-info")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let redis = store::nodes;
    match (req.method(), rest) {
        (Method::Put, "" | "/") => {
            let config: EventConfig = json_body(req)?;
            // Bad input is refused even when Redis is down (upsert_event checks again).
            config.validate()?;
            let (created, shards) = admin::upsert_event(&redis()?, &event, &config)?;
            Ok((
                if created { 201 } else { 200 },
                json!({ "event_id": event.as_str(), "created": created, "shards": shards }),
            ))
        }
        (Method::Patch, "" | "/") => {
            let switches: Switches = json_body(req)?;
            switches.fields()?; // refused even when Redis is down (set_switches checks again)
            admin::set_switches(&redis()?, &event, &switches)?;
            Ok((200, json!({ "event_id": event.as_str(), "updated": true })))
        }
        (Method::Get, "" | "/") => Ok((200, http::to_value(&admin::status(&redis()?, &event)?)?)),
        (Method::Post, "/warmup") => {
            Ok((200, http::to_value(&admin::warm_up(&redis()?, &event)?)?))
        }
        (Method::Post, "/deny") => {
            let list: DenyList = json_body(req)?;
            admin::check_deny_list(&list)?; // refused even when Redis is down (deny checks again)
            admin::deny(&redis()?, &event, &list)?;
            Ok((
                200,
                json!({ "denied": list.users.len() + list.addrs.len() }),
            ))
        }
        (Method::Post, "/draw") => Ok((
            200,
            json!({ "admitted": admin::draw(&redis()?, &event, admin::DRAW_PAGE)? }),
        )),
        (_, "" | "/") => Err(ApiError::method_not_allowed("GET, PUT, PATCH")),
        (_, "/warmup" | "/deny" | "/draw") => Err(ApiError::method_not_allowed("POST")),
        _ => Err(ApiError::not_found(format!("no admin route {rest}"))),
    }
}

/// `GET /admin/events`: the registry of every node, sorted (one `SMEMBERS` script per node).
fn list(req: &Request) -> Result<(u16, serde_json::Value), ApiError> {
    http::require_method(req, Method::Get)?;
    let mut events = Vec::new();
    for node in store::nodes()?.all() {
        let node = node.map_err(seckill_domain::Error::from)?;
        events.extend(
            registry::events(node)?
                .into_iter()
                .map(|e| e.as_str().to_owned()),
        );
    }
    events.sort();
    Ok((200, json!({ "events": events })))
}
