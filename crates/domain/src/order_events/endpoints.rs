//! The shop's endpoints, as operators manage them: register (the secret shown once), list,
//! rotate the secret (the old one signs beside the new for [`ROTATION_OVERLAP_MS`]), disable and
//! enable, replay, read the delivery log, remove.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::EventType;
use super::signature::Secret;
use crate::error::{Error, ErrorCode};
use crate::sql::{Cell, DbError, Param, Rows, Sql, int, optional_int, optional_text, s, text};

/// How long a rotated-out secret keeps signing beside the new one.
pub const ROTATION_OVERLAP_MS: u64 = 24 * 3_600_000;

/// The longest URL an endpoint may have.
const MAX_URL: usize = 2048;

/// An endpoint and how its deliveries go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub endpoint_id: String,
    pub url: String,
    pub description: String,
    pub enabled: bool,
    pub created_ms: i64,
    pub disabled_ms: Option<i64>,
    /// Why it is disabled.
    pub disabled_by: Option<DisabledBy>,
    /// Failing at the event at its cursor since then, that many attempts, next at.
    pub failing_since_ms: Option<i64>,
    pub attempts: i64,
    pub next_attempt_ms: i64,
    pub last_error: Option<String>,
    /// Whether a rotated-out secret still signs, until when.
    pub previous_secret_until_ms: Option<i64>,
}

/// Why an endpoint is disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DisabledBy {
    /// An operator disabled it.
    Operator,
    /// It answered `410 Gone`: the receiver asked for no more.
    Gone,
    /// It kept failing for `order_events_disable_after_s`.
    Failing,
}

impl DisabledBy {
    /// Every kind.
    pub const ALL: [DisabledBy; 3] = [DisabledBy::Operator, DisabledBy::Gone, DisabledBy::Failing];

    /// Its name in the database and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            DisabledBy::Operator => "operator",
            DisabledBy::Gone => "gone",
            DisabledBy::Failing => "failing",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<DisabledBy> {
        DisabledBy::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// A new endpoint and its secret, which is never shown again.
#[derive(Debug, Clone, Serialize)]
pub struct Registered {
    pub endpoint: Endpoint,
    pub secret: String,
}

/// An attempt from the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub msg_id: String,
    /// The event's type (none once the event is trimmed).
    #[serde(rename = "type")]
    pub kind: Option<EventType>,
    pub attempted_ms: i64,
    /// The answer's status; none if no answer came.
    pub status: Option<i64>,
    pub error: Option<String>,
    pub took_ms: i64,
    pub replay: bool,
}

/// An operator's registration: `POST /admin/webhooks`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewEndpoint {
    pub url: String,
    #[serde(default)]
    pub description: String,
}

/// An operator's replay: `{"msg_id"}` or `{"from_ms", "to_ms"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    msg_id: Option<String>,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
}

impl ReplayRequest {
    /// What it asks to send again.
    pub fn replay(self) -> Result<Replay, Error> {
        match self {
            ReplayRequest {
                msg_id: Some(msg_id),
                from_ms: None,
                to_ms: None,
            } => Ok(Replay::Message(msg_id)),
            ReplayRequest {
                msg_id: None,
                from_ms: Some(from_ms),
                to_ms: Some(to_ms),
            } => Ok(Replay::Range { from_ms, to_ms }),
            _ => Err(Error::invalid(
                ErrorCode::MalformedJson,
                "give `msg_id`, or `from_ms` and `to_ms`",
            )),
        }
    }
}

/// What to send again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    /// One message, by its `webhook-id`.
    Message(String),
    /// Every event of the changes from `from_ms` up to (not including) `to_ms`.
    Range { from_ms: i64, to_ms: i64 },
}

/// `url` if an endpoint may have it: `https`, a host name or a public address, no credentials.
/// Names that resolve to a private address are refused when a delivery connects
/// (the runtime's blocked networks); this catches the ones that say so themselves.
pub fn check_url(url: &str) -> Result<&str, Error> {
    let bad = |why: &str| Error::invalid(ErrorCode::InvalidEndpoint, format!("{why}: {url:?}"));
    if url.len() > MAX_URL || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("not a URL"));
    }
    let (authority, _) = split_url(url).ok_or_else(|| bad("an endpoint's URL is https"))?;
    if authority.contains('@') {
        return Err(bad("no credentials in the URL"));
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let lower = host.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") || lower.ends_with(".internal") {
        return Err(bad("a local host name"));
    }
    if let Ok(ip) = host.parse::<IpAddr>()
        && !is_public(ip)
    {
        return Err(bad("a private, loopback or link-local address"));
    }
    Ok(url)
}

/// An endpoint's `https` URL as a request names it: the authority, and the path with its query
/// (`/` when it has none; the fragment, never sent, left out). `None` if it is not `https`.
pub fn split_url(url: &str) -> Option<(&str, String)> {
    let rest = url.strip_prefix("https://")?;
    let rest = rest.split('#').next().unwrap_or(rest);
    let (authority, path) = rest
        .find(['/', '?'])
        .map_or((rest, ""), |i| rest.split_at(i));
    let path = match path {
        "" => "/".to_owned(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_owned(),
    };
    Some((authority, path))
}

/// Whether `ip` is an address on the public internet (not private, loopback, link-local,
/// unspecified, shared or documentation space).
pub fn is_public(ip: IpAddr) -> bool {
    match crate::net::canonical(ip) {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

const COLUMNS: &str = "endpoint_id, url, description, enabled, created_ms, disabled_ms,
    disabled_by, failing_since_ms, attempts::bigint, next_attempt_ms, last_error,
    CASE WHEN cardinality(secrets) = 2 THEN previous_until_ms END";

fn endpoints(rows: Rows) -> Result<Vec<Endpoint>, Error> {
    rows.rows
        .iter()
        .map(|row| {
            Ok(Endpoint {
                endpoint_id: text(row, 0)?,
                url: text(row, 1)?,
                description: text(row, 2)?,
                enabled: matches!(row.get(3), Some(Cell::Bool(true))),
                created_ms: int(row, 4)?,
                disabled_ms: optional_int(row, 5)?,
                disabled_by: optional_text(row, 6)?
                    .map(|by| {
                        DisabledBy::parse(&by)
                            .ok_or_else(|| DbError::unexpected(format!("disabled_by {by:?}")))
                    })
                    .transpose()?,
                failing_since_ms: optional_int(row, 7)?,
                attempts: int(row, 8)?,
                next_attempt_ms: int(row, 9)?,
                last_error: optional_text(row, 10)?,
                previous_secret_until_ms: optional_int(row, 11)?,
            })
        })
        .collect()
}

/// Registers an endpoint at `url`; it gets the events committed from now on.
pub fn register(
    db: &impl Sql,
    url: &str,
    description: &str,
    now_ms: u64,
) -> Result<Registered, Error> {
    let url = check_url(url)?;
    if description.chars().count() > 200 {
        return Err(Error::invalid(
            ErrorCode::InvalidEndpoint,
            "a description is at most 200 characters",
        ));
    }
    let secret = Secret::generate();
    let id = format!("ep_{}", crate::ids::random_hex(12));
    let rows = db.query(
        &format!(
            "INSERT INTO webhook_endpoints (endpoint_id, url, description, secrets, created_ms)
             VALUES ($1, $2, $3, $4, $5) RETURNING {COLUMNS}"
        ),
        &[
            s(&id),
            s(url),
            s(description),
            Param::ArrayStr(vec![secret.expose()]),
            Param::Int64(now_ms as i64),
        ],
    )?;
    let endpoint = endpoints(rows)?
        .pop()
        .ok_or_else(|| Error::bug("no row returned"))?;
    Ok(Registered {
        endpoint,
        secret: secret.expose(),
    })
}

/// Every endpoint.
pub fn list(db: &impl Sql) -> Result<Vec<Endpoint>, Error> {
    endpoints(db.query(
        &format!("SELECT {COLUMNS} FROM webhook_endpoints ORDER BY created_ms, endpoint_id"),
        &[],
    )?)
}

fn not_found(id: &str) -> Error {
    Error::invalid(ErrorCode::NotFound, format!("no endpoint `{id}`"))
}

/// One endpoint.
pub fn get(db: &impl Sql, id: &str) -> Result<Endpoint, Error> {
    endpoints(db.query(
        &format!("SELECT {COLUMNS} FROM webhook_endpoints WHERE endpoint_id = $1"),
        &[s(id)],
    )?)?
    .pop()
    .ok_or_else(|| not_found(id))
}

/// A new secret for `id`; the current one signs beside it for [`ROTATION_OVERLAP_MS`].
pub fn rotate(db: &impl Sql, id: &str, now_ms: u64) -> Result<Registered, Error> {
    let secret = Secret::generate();
    let rows = db.query(
        &format!(
            "UPDATE webhook_endpoints SET secrets = ARRAY[$2, secrets[1]], previous_until_ms = $3
             WHERE endpoint_id = $1 RETURNING {COLUMNS}"
        ),
        &[
            s(id),
            s(&secret.expose()),
            Param::Int64((now_ms + ROTATION_OVERLAP_MS) as i64),
        ],
    )?;
    let endpoint = endpoints(rows)?.pop().ok_or_else(|| not_found(id))?;
    Ok(Registered {
        endpoint,
        secret: secret.expose(),
    })
}

/// Disables or enables `id`. Enabled again, it starts over at the event it stopped at.
pub fn set_enabled(db: &impl Sql, id: &str, enabled: bool, now_ms: u64) -> Result<Endpoint, Error> {
    let statement = if enabled {
        "UPDATE webhook_endpoints SET enabled = true, disabled_ms = NULL, disabled_by = NULL,
             attempts = 0, failing_since_ms = NULL, next_attempt_ms = 0
         WHERE endpoint_id = $1 RETURNING "
    } else {
        "UPDATE webhook_endpoints SET enabled = false, disabled_ms = $2,
             disabled_by = 'operator'
         WHERE endpoint_id = $1 RETURNING "
    };
    endpoints(db.query(
        &format!("{statement}{COLUMNS}"),
        &[s(id), Param::Int64(now_ms as i64)][..if enabled { 1 } else { 2 }],
    )?)?
    .pop()
    .ok_or_else(|| not_found(id))
}

/// Removes `id` and its log.
pub fn remove(db: &impl Sql, id: &str) -> Result<(), Error> {
    match db.execute(
        "DELETE FROM webhook_endpoints WHERE endpoint_id = $1",
        &[s(id)],
    )? {
        0 => Err(not_found(id)),
        _ => Ok(()),
    }
}

/// Queues `what` to be sent to `id` again: how many events.
pub fn replay(db: &impl Sql, id: &str, what: &Replay) -> Result<u64, Error> {
    get(db, id)?;
    let n = match what {
        Replay::Message(msg_id) => {
            // The id ends in its event's seq (`order_event_id`, which checks the rest): found
            // by its key, not by computing every event's id.
            let seq = msg_id
                .rsplit_once('_')
                .and_then(|(_, seq)| seq.parse::<i64>().ok())
                .unwrap_or(-1);
            db.execute(
                "INSERT INTO webhook_replays (endpoint_id, seq)
                 SELECT $1, seq FROM order_events
                 WHERE seq = $3 AND order_event_id(seq) = $2
                 ON CONFLICT DO NOTHING",
                &[s(id), s(msg_id), Param::Int64(seq)],
            )?
        }
        Replay::Range { from_ms, to_ms } => {
            if from_ms >= to_ms {
                return Err(Error::invalid(
                    ErrorCode::BadQuery,
                    "`from_ms` must be before `to_ms`",
                ));
            }
            db.execute(
                "INSERT INTO webhook_replays (endpoint_id, seq)
                 SELECT $1, seq FROM order_events WHERE created_ms >= $2 AND created_ms < $3
                 ON CONFLICT DO NOTHING",
                &[s(id), Param::Int64(*from_ms), Param::Int64(*to_ms)],
            )?
        }
    };
    if n == 0 && matches!(what, Replay::Message(_)) {
        return Err(Error::invalid(
            ErrorCode::NotFound,
            "no such message (or trimmed)",
        ));
    }
    Ok(n)
}

/// The last `limit` attempts to `id`, newest first.
pub fn deliveries(db: &impl Sql, id: &str, limit: u32) -> Result<Vec<Delivery>, Error> {
    get(db, id)?;
    let rows = db.query(
        "SELECT d.msg_id, d.attempted_ms, d.status::bigint, d.error, d.took_ms, d.replay, e.type
         FROM webhook_deliveries d LEFT JOIN order_events e USING (seq)
         WHERE d.endpoint_id = $1
         ORDER BY d.attempted_ms DESC, d.seq DESC LIMIT $2",
        &[s(id), Param::Int64(i64::from(limit))],
    )?;
    rows.rows
        .iter()
        .map(|row| {
            Ok(Delivery {
                msg_id: text(row, 0)?,
                attempted_ms: int(row, 1)?,
                status: optional_int(row, 2)?,
                error: optional_text(row, 3)?,
                took_ms: int(row, 4)?,
                replay: matches!(row.get(5), Some(Cell::Bool(true))),
                kind: optional_text(row, 6)?.and_then(|t| EventType::parse(&t)),
            })
        })
        .collect()
}

/// What an enabled endpoint has yet to get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backlog {
    pub endpoint_id: String,
    /// Events after its cursor.
    pub pending: i64,
    /// How long ago the oldest of them happened, ms (0 when none): the events' lag.
    pub oldest_ms: i64,
}

/// Every enabled endpoint's backlog at `now_ms`.
pub fn backlog(db: &impl Sql, now_ms: u64) -> Result<Vec<Backlog>, Error> {
    let rows = db.query(
        "SELECT w.endpoint_id, count(e.seq), COALESCE($1 - min(e.created_ms), 0)
         FROM webhook_endpoints w
         LEFT JOIN order_events e ON (e.tx, e.seq) > (w.cursor_tx, w.cursor_seq)
         WHERE w.enabled
         GROUP BY w.endpoint_id ORDER BY w.endpoint_id",
        &[Param::Int64(now_ms as i64)],
    )?;
    rows.rows
        .iter()
        .map(|row| {
            Ok(Backlog {
                endpoint_id: text(row, 0)?,
                pending: int(row, 1)?,
                oldest_ms: int(row, 2)?.max(0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_splits_into_the_authority_and_the_path_with_its_query() {
        let cases = [
            ("https://shop.example.com", ("shop.example.com", "/")),
            (
                "https://shop.example.com/hooks",
                ("shop.example.com", "/hooks"),
            ),
            (
                "https://shop.example.com:8443/a/b?x=1#frag",
                ("shop.example.com:8443", "/a/b?x=1"),
            ),
            (
                "https://shop.example.com?x=1",
                ("shop.example.com", "/?x=1"),
            ),
            ("https://[2606:4700::1111]/h", ("[2606:4700::1111]", "/h")),
        ];
        for (url, (authority, path)) in cases {
            assert_eq!(split_url(url), Some((authority, path.to_owned())), "{url}");
        }
        assert_eq!(split_url("http://shop.example.com/"), None);
    }

    #[test]
    fn only_https_to_public_hosts() {
        for ok in [
            "https://shop.example.com/hooks",
            "https://shop.example.com:8443/hooks?x=1",
            "https://93.184.216.34/hooks",
            "https://[2606:4700::1111]/hooks",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://shop.example.com/hooks",
            "https://user:pw@shop.example.com/",
            "https://localhost/hooks",
            "https://127.0.0.1/hooks",
            "https://10.1.2.3/",
            "https://192.168.0.1:443/",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/",
            "https://[::1]/",
            "https://[fe80::1]/",
            "https://[fd00::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https:///nohost",
            "https://a b/",
        ] {
            let e = check_url(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidEndpoint, "{bad}");
        }
    }
}
