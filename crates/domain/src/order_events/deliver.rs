//! The delivery job: each enabled endpoint gets the events after its cursor, oldest first, one
//! at a time, signed ([`super::signature`]); the cursor moves past an event once the endpoint
//! answered it `2xx`. A failure stops that endpoint's stream (so an order's later event never
//! overtakes an earlier one) until its next attempt, after the [`DeliveryOptions::retry_after_ms`]
//! schedule; an endpoint failing for [`DeliveryOptions::disable_after_ms`], or answering `410
//! Gone`, is disabled and says why. Events an operator asked to replay go after the stream.
//! Every attempt is in the delivery log; events and log older than
//! [`DeliveryOptions::keep_ms`] are trimmed.

use serde::Serialize;

use super::endpoints::DisabledBy;
use super::signature::{Secret, signature_header};
use crate::sql::{DbError, Param, Sql, int, optional_int, s, text};

/// What sends a request to an endpoint: the platform's outbound HTTP.
pub trait Sender {
    /// POSTs `body` to `url` with `headers`: the status, or why none came back.
    fn post(&mut self, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16, String>;
}

/// How the job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryOptions {
    /// After the n-th failure in a row, the next attempt waits the n-th of these (the last
    /// again after that): Standard Webhooks' example schedule, 5 s to 10 h.
    pub retry_after_ms: Vec<u64>,
    /// An endpoint failing this long is disabled.
    pub disable_after_ms: u64,
    /// Events and delivery log entries are kept this long.
    pub keep_ms: u64,
    /// Events read at once per endpoint.
    pub batch: u32,
}

/// How long an endpoint may fail before it is disabled by default: five days.
pub const DISABLE_AFTER_S: u64 = 432_000;
/// How many days events and their delivery log are kept by default.
pub const KEEP_DAYS: u64 = 7;

impl Default for DeliveryOptions {
    fn default() -> Self {
        const S: u64 = 1000;
        DeliveryOptions {
            retry_after_ms: vec![5 * S, 300 * S, 1800 * S, 7200 * S, 18000 * S, 36000 * S],
            disable_after_ms: DISABLE_AFTER_S * S,
            keep_ms: KEEP_DAYS * 86_400 * S,
            batch: 100,
        }
    }
}

/// What a run did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryReport {
    /// Endpoints that were due.
    pub endpoints: u32,
    /// Events delivered (answered `2xx`), replays included.
    pub delivered: u32,
    /// Attempts that failed.
    pub failed: u32,
    /// Endpoints disabled by this run.
    pub disabled: u32,
    /// Events trimmed for age.
    pub trimmed: u64,
    /// Of the delivered stream events, the most time from the change to its delivery, ms
    /// (the events' lag).
    pub max_lag_ms: u64,
}

struct Due {
    id: String,
    url: String,
    secrets: Vec<Secret>,
    attempts: i64,
    failing_since_ms: Option<i64>,
}

struct Pending {
    seq: i64,
    msg_id: String,
    created_ms: i64,
    payload: String,
}

/// How long a run holds the endpoints it claimed: longer than a run's budget, so that only a
/// run that died leaves one to the next.
pub const LEASE_MS: u64 = 120_000;

/// One run at `now_ms`, until `past_budget` says so (asked between requests): the endpoints
/// due and not held by another run are claimed, delivered to, and let go.
pub fn deliver(
    db: &impl Sql,
    sender: &mut impl Sender,
    options: &DeliveryOptions,
    now_ms: u64,
    past_budget: impl Fn() -> bool,
) -> Result<DeliveryReport, DbError> {
    let mut report = DeliveryReport::default();
    let now = now_ms as i64;
    for due in claim_due(db, now)? {
        report.endpoints += 1;
        let delivered = deliver_to(db, sender, options, &due, now, &past_budget, &mut report);
        db.execute(
            "UPDATE webhook_endpoints SET leased_until_ms = 0 WHERE endpoint_id = $1",
            &[s(&due.id)],
        )?;
        delivered?;
    }
    report.trimmed = trim(db, now - options.keep_ms as i64)?;
    Ok(report)
}

/// The stream of one endpoint, then its replays.
fn deliver_to(
    db: &impl Sql,
    sender: &mut impl Sender,
    options: &DeliveryOptions,
    due: &Due,
    now: i64,
    past_budget: &impl Fn() -> bool,
    report: &mut DeliveryReport,
) -> Result<(), DbError> {
    loop {
        let stream = pending(db, &due.id, options.batch, false)?;
        if stream.is_empty() {
            break;
        }
        for event in &stream {
            if past_budget() {
                return Ok(());
            }
            match attempt(db, sender, due, event, false)? {
                Ok(()) => {
                    report.delivered += 1;
                    report.max_lag_ms = report
                        .max_lag_ms
                        .max((crate::clock::now_ms() as i64 - event.created_ms).max(0) as u64);
                    db.execute(
                        "UPDATE webhook_endpoints w SET cursor_tx = e.tx, cursor_seq = e.seq,
                             attempts = 0, failing_since_ms = NULL, next_attempt_ms = 0,
                             last_error = NULL
                         FROM order_events e WHERE w.endpoint_id = $1 AND e.seq = $2",
                        &[s(&due.id), Param::Int64(event.seq)],
                    )?;
                }
                Err(error) => {
                    report.failed += 1;
                    if failing(db, due, options, now, &error)? {
                        report.disabled += 1;
                    }
                    return Ok(());
                }
            }
        }
    }
    for event in pending(db, &due.id, options.batch, true)? {
        if past_budget() {
            return Ok(());
        }
        match attempt(db, sender, due, &event, true)? {
            Ok(()) => {
                report.delivered += 1;
                db.execute(
                    "DELETE FROM webhook_replays WHERE endpoint_id = $1 AND seq = $2",
                    &[s(&due.id), Param::Int64(event.seq)],
                )?;
            }
            Err(_) => {
                // Tried again on the next run; a replay does not move the endpoint's state.
                report.failed += 1;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Claims the enabled endpoints whose next attempt is due and that no run holds, with the
/// secrets that sign now.
fn claim_due(db: &impl Sql, now: i64) -> Result<Vec<Due>, DbError> {
    let rows = db.query(
        "UPDATE webhook_endpoints SET leased_until_ms = $2
         WHERE enabled AND next_attempt_ms <= $1 AND leased_until_ms <= $1
         RETURNING endpoint_id, url,
                CASE WHEN previous_until_ms IS NULL OR previous_until_ms <= $1
                     THEN secrets[1] ELSE array_to_string(secrets, ' ') END,
                attempts::bigint, failing_since_ms",
        &[Param::Int64(now), Param::Int64(now + LEASE_MS as i64)],
    )?;
    rows.rows
        .iter()
        .map(|row| {
            let secrets = text(row, 2)?
                .split(' ')
                .map(|t| {
                    Secret::parse(t)
                        .ok_or_else(|| DbError::unexpected("a stored secret is not whsec_"))
                })
                .collect::<Result<_, _>>()?;
            Ok(Due {
                id: text(row, 0)?,
                url: text(row, 1)?,
                secrets,
                attempts: int(row, 3)?,
                failing_since_ms: optional_int(row, 4)?,
            })
        })
        .collect()
}

/// The endpoint's next events: its stream after the cursor, over transactions older than every
/// one still running (no later commit can slip in behind the cursor), or its replays.
fn pending(
    db: &impl Sql,
    endpoint: &str,
    batch: u32,
    replays: bool,
) -> Result<Vec<Pending>, DbError> {
    let statement = if replays {
        "SELECT e.seq, order_event_id(e.seq), e.created_ms, order_event_body(e)
         FROM webhook_replays r JOIN order_events e USING (seq)
         WHERE r.endpoint_id = $1 ORDER BY e.tx, e.seq LIMIT $2"
    } else {
        "SELECT e.seq, order_event_id(e.seq), e.created_ms, order_event_body(e)
         FROM webhook_endpoints w JOIN order_events e ON (e.tx, e.seq) > (w.cursor_tx, w.cursor_seq)
         WHERE w.endpoint_id = $1 AND e.tx < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY e.tx, e.seq LIMIT $2"
    };
    let rows = db.query(statement, &[s(endpoint), Param::Int64(i64::from(batch))])?;
    rows.rows
        .iter()
        .map(|row| {
            Ok(Pending {
                seq: int(row, 0)?,
                msg_id: text(row, 1)?,
                created_ms: int(row, 2)?,
                payload: text(row, 3)?,
            })
        })
        .collect()
}

/// Sends `event` to `due` and logs the attempt when it was made: `Err` with what went wrong
/// unless `2xx`.
fn attempt(
    db: &impl Sql,
    sender: &mut impl Sender,
    due: &Due,
    event: &Pending,
    replay: bool,
) -> Result<Result<(), Failure>, DbError> {
    let started = crate::clock::now_ms();
    let timestamp_s = started / 1000;
    let timestamp = timestamp_s.to_string();
    let signature = signature_header(
        &due.secrets,
        &event.msg_id,
        timestamp_s,
        event.payload.as_bytes(),
    );
    let headers = [
        ("content-type", "application/json"),
        ("webhook-id", event.msg_id.as_str()),
        ("webhook-timestamp", timestamp.as_str()),
        ("webhook-signature", signature.as_str()),
    ];
    let result = sender.post(&due.url, &headers, event.payload.as_bytes());
    let took = crate::clock::now_ms().saturating_sub(started) as i64;
    let (status, error) = match &result {
        Ok(status) => (i64::from(*status), String::new()),
        Err(e) => (-1, e.clone()),
    };
    db.execute(
        "INSERT INTO webhook_deliveries
             (endpoint_id, seq, msg_id, attempted_ms, status, error, took_ms, replay)
         VALUES ($1, $2, $3, $4, NULLIF($5::bigint, -1)::integer, NULLIF($6, ''), $7, $8::text::boolean)",
        &[
            s(&due.id),
            Param::Int64(event.seq),
            s(&event.msg_id),
            Param::Int64(started as i64),
            Param::Int64(status),
            s(&error),
            Param::Int64(took),
            s(if replay { "true" } else { "false" }),
        ],
    )?;
    Ok(match result {
        Ok(200..=299) => Ok(()),
        Ok(410) => Err(Failure::Gone),
        Ok(status) => Err(Failure::Status(status)),
        Err(e) => Err(Failure::NoAnswer(e)),
    })
}

/// Why an attempt failed.
#[derive(Debug)]
enum Failure {
    /// `410 Gone`: the receiver asks for no more.
    Gone,
    Status(u16),
    NoAnswer(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Gone => f.write_str("answered 410 Gone"),
            Failure::Status(status) => write!(f, "answered {status}"),
            Failure::NoAnswer(e) => write!(f, "no answer: {e}"),
        }
    }
}

/// Counts a failure at the endpoint's cursor: its next attempt after the schedule, or the
/// endpoint disabled (whether it was).
fn failing(
    db: &impl Sql,
    due: &Due,
    options: &DeliveryOptions,
    now: i64,
    failure: &Failure,
) -> Result<bool, DbError> {
    let attempts = due.attempts + 1;
    let since = due.failing_since_ms.unwrap_or(now);
    let disable = match failure {
        Failure::Gone => Some(DisabledBy::Gone),
        _ if now - since >= options.disable_after_ms as i64 => Some(DisabledBy::Failing),
        _ => None,
    };
    let wait = options
        .retry_after_ms
        .get(usize::try_from(attempts - 1).unwrap_or(0))
        .or(options.retry_after_ms.last())
        .copied()
        .unwrap_or(0);
    db.execute(
        "UPDATE webhook_endpoints SET attempts = $2::bigint::integer, failing_since_ms = $3,
             next_attempt_ms = $4, last_error = $5,
             enabled = enabled AND $6 = '', disabled_ms = CASE WHEN $6 = '' THEN disabled_ms ELSE $7 END,
             disabled_by = COALESCE(NULLIF($6, ''), disabled_by)
         WHERE endpoint_id = $1",
        &[
            s(&due.id),
            Param::Int64(attempts),
            Param::Int64(since),
            Param::Int64(now + wait as i64),
            s(&failure.to_string()),
            s(disable.map_or("", DisabledBy::as_str)),
            Param::Int64(now),
        ],
    )?;
    Ok(disable.is_some())
}

/// Events trimmed at most per run: the oldest, by `seq` (no index on their age to keep up).
const TRIM_BATCH: i64 = 10_000;

/// Deletes events and log entries from before `cutoff_ms`: how many events.
fn trim(db: &impl Sql, cutoff_ms: i64) -> Result<u64, DbError> {
    db.execute(
        "DELETE FROM webhook_deliveries WHERE attempted_ms < $1",
        &[Param::Int64(cutoff_ms)],
    )?;
    db.execute(
        "DELETE FROM order_events WHERE seq IN (
             SELECT seq FROM order_events ORDER BY seq LIMIT $2) AND created_ms < $1",
        &[Param::Int64(cutoff_ms), Param::Int64(TRIM_BATCH)],
    )
}
