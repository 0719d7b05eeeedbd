//! Who changed what: every operator's write to an event, recorded in Postgres
//! (`operator_audit`, `migrations/0004_operator_audit.sql`) after it was applied, and read back
//! newest first.
//!
//! The record follows the change, never the other way round: the sale runs on Redis alone, and
//! an operator must be able to pause it while Postgres is down. So a write whose record cannot
//! be stored has still happened; the admin function answers it as done, says the record is
//! missing, and logs the whole record (`functions/admin`).

use serde::Serialize;
use serde_json::Value;

use crate::auth::{Operator, Role};
use crate::error::Error;
use crate::event::{EventConfig, EventId};
use crate::sql::{Cell, DbError, Param, Sql, int, text};
use crate::versions;

/// At most this many records per read.
pub const MAX_LIMIT: u32 = 200;
/// Records per read when the caller names no limit.
pub const DEFAULT_LIMIT: u32 = 50;

/// One write by an operator, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// When it was answered, Unix ms.
    pub at_ms: i64,
    /// Who: the operator's name.
    pub operator: String,
    /// Their role when they made it.
    pub role: Role,
    /// The request's method (`PUT`, `PATCH`, `POST`).
    pub method: String,
    /// The request's path.
    pub path: String,
    /// The event it changed.
    pub event_id: String,
    /// What it changed, before (the event's configuration; none for additions and runs).
    pub before: Option<Value>,
    /// After: the configuration, the entries added or what the call returned; on a failure,
    /// the error answered.
    pub after: Option<Value>,
    /// The HTTP status answered.
    pub status: u16,
}

impl Entry {
    /// The event id a write to no event (the global limit) is recorded under.
    pub const NO_EVENT: &'static str = "*";

    /// A write by `who` on `event`, answered now with `status`.
    pub fn new(
        who: &Operator,
        (method, path): (&str, &str),
        event: &EventId,
        changed: (Option<Value>, Option<Value>),
        status: u16,
        at_ms: u64,
    ) -> Self {
        Self::of(who, (method, path), event.as_str(), changed, status, at_ms)
    }

    /// A run of a job by `who` (`POST /admin/jobs/drain`), answered now with `status` and
    /// `answer` (its report, or the error).
    pub fn job_run(
        who: &Operator,
        (method, path): (&str, &str),
        answer: Option<Value>,
        status: u16,
        at_ms: u64,
    ) -> Self {
        Self::of(
            who,
            (method, path),
            Self::NO_EVENT,
            (None, answer),
            status,
            at_ms,
        )
    }

    /// A write by `who` to the settings of every event (`PUT`), answered now with `status`.
    pub fn global(
        who: &Operator,
        path: &str,
        changed: (Option<Value>, Option<Value>),
        status: u16,
        at_ms: u64,
    ) -> Self {
        Self::unscoped(who, ("PUT", path), changed, status, at_ms)
    }

    /// A write by `who` to what belongs to no event (the order events' endpoints), answered
    /// now with `status`.
    pub fn unscoped(
        who: &Operator,
        (method, path): (&str, &str),
        changed: (Option<Value>, Option<Value>),
        status: u16,
        at_ms: u64,
    ) -> Self {
        Self::of(who, (method, path), Self::NO_EVENT, changed, status, at_ms)
    }

    fn of(
        who: &Operator,
        (method, path): (&str, &str),
        event_id: &str,
        (before, after): (Option<Value>, Option<Value>),
        status: u16,
        at_ms: u64,
    ) -> Self {
        Entry {
            at_ms: i64::try_from(at_ms).unwrap_or(i64::MAX),
            operator: who.name.clone(),
            role: who.role,
            method: method.to_owned(),
            path: path.to_owned(),
            event_id: event_id.to_owned(),
            before,
            after,
            status,
        }
    }
}

/// A stored [`Entry`] with its id (ids grow with each record).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// The record's id.
    pub id: i64,
    /// The write.
    #[serde(flatten)]
    pub entry: Entry,
}

/// JSON as the statement's text parameter; `""` (SQL `NULL` through `NULLIF`) for none.
fn json_param(v: Option<&Value>) -> Param {
    Param::Str(v.map_or_else(String::new, Value::to_string))
}

/// Stores `entry`; returns its id.
pub fn record(db: &impl Sql, entry: &Entry) -> Result<i64, Error> {
    let row = insert(db, entry, "")?
        .ok_or_else(|| DbError::unexpected("INSERT … RETURNING id returned no row"))?;
    Ok(row)
}

/// Records an operator's write: its audit entry and, when the write changed the event's
/// configuration, the version it made of the configuration after (`change`, and the version
/// rolled back to, if any). The audit first, as [`record`] says why.
pub fn record_write(
    db: &impl Sql,
    entry: &Entry,
    version: Option<((versions::Change, Option<i64>), &crate::admin::Config)>,
) -> Result<(), Error> {
    record(db, entry)?;
    if let Some((change, after)) = version {
        let event = EventId::parse(&entry.event_id)?;
        let config = EventConfig::from_fields(after)
            .ok_or_else(|| Error::bug("the configuration after the change does not read back"))?;
        let at = u64::try_from(entry.at_ms).unwrap_or(0);
        versions::record(db, &event, &entry.operator, change, &config, at)?;
    }
    Ok(())
}

/// Records a run of a job (`entry`, under [`Entry::NO_EVENT`]) as the audit keeps them: every
/// run a person starts, and of a scheduler's only the first its credential makes (a scheduler
/// runs the jobs every second: the host's metrics count those). Returns whether it was stored.
pub fn record_job_run(db: &impl Sql, entry: &Entry) -> Result<bool, Error> {
    let only_first = match entry.role {
        Role::Scheduler => {
            " WHERE NOT EXISTS (SELECT 1 FROM operator_audit
                   WHERE event_id = $6 AND operator = $2 AND role = $3)"
        }
        Role::Operator | Role::Viewer => "",
    };
    Ok(insert(db, entry, only_first)?.is_some())
}

/// Inserts `entry` (unless `condition`, over the same parameters, says not to); its id.
fn insert(db: &impl Sql, entry: &Entry, condition: &str) -> Result<Option<i64>, Error> {
    let rows = db.query(
        &format!(
            "INSERT INTO operator_audit
                 (at_ms, operator, role, method, path, event_id, before, after, status)
             SELECT $1, $2, $3, $4, $5, $6, NULLIF($7::text, '')::jsonb,
                    NULLIF($8::text, '')::jsonb, $9::bigint::integer{condition}
             RETURNING id"
        ),
        &[
            Param::Int64(entry.at_ms),
            Param::Str(entry.operator.clone()),
            Param::Str(entry.role.as_str().to_owned()),
            Param::Str(entry.method.clone()),
            Param::Str(entry.path.clone()),
            Param::Str(entry.event_id.clone()),
            json_param(entry.before.as_ref()),
            json_param(entry.after.as_ref()),
            Param::Int64(i64::from(entry.status)),
        ],
    )?;
    Ok(rows.rows.first().map(|row| int(row, 0)).transpose()?)
}

/// The newest `limit` records (at most [`MAX_LIMIT`]), of one event or of all, newest first.
pub fn recent(db: &impl Sql, event: Option<&EventId>, limit: u32) -> Result<Vec<Recorded>, Error> {
    const COLUMNS: &str = "SELECT id, at_ms, operator, role, method, path, event_id,
                                  before::text, after::text, status
                           FROM operator_audit";
    let limit = Param::Int64(i64::from(limit.min(MAX_LIMIT)));
    let rows = match event {
        Some(e) => db.query(
            &format!("{COLUMNS} WHERE event_id = $1 ORDER BY id DESC LIMIT $2"),
            &[Param::Str(e.as_str().to_owned()), limit],
        )?,
        None => db.query(&format!("{COLUMNS} ORDER BY id DESC LIMIT $1"), &[limit])?,
    };
    rows.rows.iter().map(|row| read(row)).collect()
}

/// One row of [`recent`]'s query.
fn read(row: &[Cell]) -> Result<Recorded, Error> {
    let json = |i: usize| -> Result<Option<Value>, DbError> {
        match row.get(i) {
            Some(Cell::Null) => Ok(None),
            _ => serde_json::from_str(&text(row, i)?)
                .map(Some)
                .map_err(|e| DbError::unexpected(format!("column {i} is not JSON: {e}"))),
        }
    };
    let role = text(row, 3)?;
    Ok(Recorded {
        id: int(row, 0)?,
        entry: Entry {
            at_ms: int(row, 1)?,
            operator: text(row, 2)?,
            role: Role::parse(&role)
                .ok_or_else(|| DbError::unexpected(format!("role {role:?} is not a role")))?,
            method: text(row, 4)?,
            path: text(row, 5)?,
            event_id: text(row, 6)?,
            before: json(7)?,
            after: json(8)?,
            status: u16::try_from(int(row, 9)?)
                .map_err(|_| DbError::unexpected("status is not an HTTP status"))?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSql, Outcome};
    use serde_json::json;

    fn ann() -> Operator {
        Operator {
            name: "ann".into(),
            role: Role::Operator,
        }
    }

    #[test]
    fn a_record_binds_every_field_as_a_parameter() {
        let event = EventId::parse("e1").unwrap();
        let entry = Entry::new(
            &ann(),
            ("PATCH", "/admin/events/e1"),
            &event,
            (Some(json!({"enabled": "1"})), Some(json!({"enabled": "0"}))),
            200,
            1_700,
        );
        let db = FakeSql::default().then(Outcome::Rows(vec![vec![Cell::Int64(7)]]));
        assert_eq!(record(&db, &entry).unwrap(), 7);
        let statements = db.statements.borrow();
        let (sql, params) = &statements[0];
        assert!(sql.starts_with("INSERT INTO operator_audit"), "{sql}");
        assert_eq!(
            params,
            &[
                Param::Int64(1_700),
                Param::Str("ann".into()),
                Param::Str("operator".into()),
                Param::Str("PATCH".into()),
                Param::Str("/admin/events/e1".into()),
                Param::Str("e1".into()),
                Param::Str(r#"{"enabled":"1"}"#.into()),
                Param::Str(r#"{"enabled":"0"}"#.into()),
                Param::Int64(200),
            ]
        );
    }

    #[test]
    fn recent_reads_rows_back_newest_first_with_a_bounded_limit() {
        let row = vec![
            Cell::Int64(9),
            Cell::Int64(1_700),
            Cell::Str("ann".into()),
            Cell::Str("operator".into()),
            Cell::Str("POST".into()),
            Cell::Str("/admin/events/e1/deny".into()),
            Cell::Str("e1".into()),
            Cell::Null,
            Cell::Str(r#"{"users": ["bot"]}"#.into()),
            Cell::Int32(200),
        ];
        let db = FakeSql::default().then(Outcome::Rows(vec![row]));
        let event = EventId::parse("e1").unwrap();
        let got = recent(&db, Some(&event), 10_000).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].id, got[0].entry.role), (9, Role::Operator));
        assert_eq!(got[0].entry.before, None);
        assert_eq!(got[0].entry.after, Some(json!({"users": ["bot"]})));
        let statements = db.statements.borrow();
        let (sql, params) = &statements[0];
        assert!(
            sql.contains("WHERE event_id = $1 ORDER BY id DESC"),
            "{sql}"
        );
        assert_eq!(
            params,
            &[Param::Str("e1".into()), Param::Int64(i64::from(MAX_LIMIT))]
        );
    }

    #[test]
    fn a_row_that_is_not_a_record_is_an_error_not_a_guess() {
        let mut row = vec![Cell::Int64(1), Cell::Int64(1), Cell::Str("ann".into())];
        row.extend([Cell::Str("admin".into())]);
        row.extend((0..6).map(|_| Cell::Str("x".into())));
        let db = FakeSql::default().then(Outcome::Rows(vec![row]));
        assert!(recent(&db, None, 1).is_err());
    }
}
