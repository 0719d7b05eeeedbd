//! The config center's history: every change of an event's configuration is a version — who,
//! when, what kind of change, and the whole configuration it left — kept in Postgres
//! (`config_versions`, `migrations/0005_config_versions.sql`). What a version changed is its
//! configuration against the one before ([`diff`]); a rollback applies an earlier version's
//! configuration again, through the same path as any change, and so is a version itself.
//!
//! Like the audit, a version is recorded after the change was applied to Redis: the sale
//! depends on Redis alone (see [`crate::audit`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, ErrorCode};
use crate::event::{EventConfig, EventId};
use crate::sql::{Cell, DbError, Param, Sql, int, optional_int, text};

/// At most this many versions per read.
pub const MAX_LIMIT: u32 = 200;

/// What made a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The event was created (`PUT`).
    Create,
    /// Its configuration was replaced (`PUT`).
    Update,
    /// Live switches and limits (`PATCH`).
    Switches,
    /// An earlier version applied again.
    Rollback,
}

impl Change {
    fn as_str(self) -> &'static str {
        match self {
            Change::Create => "create",
            Change::Update => "update",
            Change::Switches => "switches",
            Change::Rollback => "rollback",
        }
    }

    fn parse(raw: &str) -> Option<Change> {
        [
            Change::Create,
            Change::Update,
            Change::Switches,
            Change::Rollback,
        ]
        .into_iter()
        .find(|c| c.as_str() == raw)
    }
}

/// A rollback's request: the version to apply again.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackTo {
    /// The version.
    #[serde(deserialize_with = "crate::json_integer::number")]
    pub version: i64,
}

/// One field a version changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldChange {
    /// The configuration field.
    pub field: String,
    /// Its value before (`None`: the field was not there, e.g. in the first version).
    pub before: Option<Value>,
    /// Its value after.
    pub after: Option<Value>,
}

/// A version, with what it changed against the version before it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Version {
    /// The version (versions grow with each change, across events).
    pub version: i64,
    /// When, Unix ms.
    pub at_ms: i64,
    /// Who: the operator's name.
    pub operator: String,
    /// What kind of change.
    pub change: Change,
    /// For a rollback: the version applied again.
    pub rolled_back_to: Option<i64>,
    /// The whole configuration after the change.
    pub config: Value,
    /// The fields it changed (every field, for the first version).
    pub changes: Vec<FieldChange>,
}

/// Records a change the operator named `who` made to `event`'s configuration, which left
/// `config`; returns the new version.
pub fn record(
    db: &impl Sql,
    event: &EventId,
    who: &str,
    (change, rolled_back_to): (Change, Option<i64>),
    config: &EventConfig,
    at_ms: u64,
) -> Result<i64, Error> {
    let json = serde_json::to_string(config).map_err(Error::bug)?;
    let rows = db.query(
        "INSERT INTO config_versions (event_id, at_ms, operator, change, rolled_back_to, config)
         VALUES ($1, $2, $3, $4, NULLIF($5::bigint, 0), $6::text::jsonb)
         RETURNING version",
        &[
            Param::Str(event.as_str().to_owned()),
            Param::Int64(i64::try_from(at_ms).unwrap_or(i64::MAX)),
            Param::Str(who.to_owned()),
            Param::Str(change.as_str().to_owned()),
            Param::Int64(rolled_back_to.unwrap_or(0)),
            Param::Str(json),
        ],
    )?;
    let row = rows
        .rows
        .first()
        .ok_or_else(|| DbError::unexpected("INSERT … RETURNING version returned no row"))?;
    Ok(int(row, 0)?)
}

/// The newest `limit` versions of `event` (at most [`MAX_LIMIT`]), newest first, each with
/// what it changed.
pub fn list(db: &impl Sql, event: &EventId, limit: u32) -> Result<Vec<Version>, Error> {
    let limit = limit.clamp(1, MAX_LIMIT);
    // One more than asked: the oldest listed needs the one before it for its changes.
    let rows = db.query(
        "SELECT version, at_ms, operator, change, rolled_back_to, config::text
         FROM config_versions WHERE event_id = $1 ORDER BY version DESC LIMIT $2",
        &[
            Param::Str(event.as_str().to_owned()),
            Param::Int64(i64::from(limit) + 1),
        ],
    )?;
    let mut read: Vec<Version> = rows.rows.iter().map(|r| row(r)).collect::<Result<_, _>>()?;
    for i in 0..read.len() {
        let before = read.get(i + 1).map(|v| v.config.clone());
        read[i].changes = diff(before.as_ref(), &read[i].config);
    }
    read.truncate(limit as usize);
    Ok(read)
}

/// The configuration `event` had at `version`; a version of another event, or none, is
/// `404 not_found`.
pub fn config_at(db: &impl Sql, event: &EventId, version: i64) -> Result<EventConfig, Error> {
    let rows = db.query(
        "SELECT config::text FROM config_versions WHERE event_id = $1 AND version = $2",
        &[Param::Str(event.as_str().to_owned()), Param::Int64(version)],
    )?;
    let Some(r) = rows.rows.first() else {
        return Err(Error::refused(
            ErrorCode::NotFound,
            format!("event {} has no version {version}", event.as_str()),
        ));
    };
    serde_json::from_str(&text(r, 0)?)
        .map_err(|e| Error::bug(format!("version {version} is not a configuration: {e}")))
}

/// The fields whose values differ from `before` to `after` (objects), by name.
pub fn diff(before: Option<&Value>, after: &Value) -> Vec<FieldChange> {
    let empty = serde_json::Map::new();
    let before = before.and_then(Value::as_object).unwrap_or(&empty);
    let after_fields = after.as_object().unwrap_or(&empty);
    let mut names: Vec<&String> = before.keys().chain(after_fields.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| before.get(*n) != after_fields.get(*n))
        .map(|n| FieldChange {
            field: n.clone(),
            before: before.get(n).cloned(),
            after: after_fields.get(n).cloned(),
        })
        .collect()
}

/// One row of [`list`]'s query (its changes filled in by the caller).
fn row(r: &[Cell]) -> Result<Version, Error> {
    let change = text(r, 3)?;
    Ok(Version {
        version: int(r, 0)?,
        at_ms: int(r, 1)?,
        operator: text(r, 2)?,
        change: Change::parse(&change)
            .ok_or_else(|| DbError::unexpected(format!("change {change:?} is not a change")))?,
        rolled_back_to: optional_int(r, 4)?,
        config: serde_json::from_str(&text(r, 5)?)
            .map_err(|e| DbError::unexpected(format!("config is not JSON: {e}")))?,
        changes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_may_be_written_as_any_whole_json_number() {
        for body in [
            r#"{"version":287}"#,
            r#"{"version":287.0}"#,
            r#"{"version":2.87e2}"#,
        ] {
            let r: RollbackTo = serde_json::from_str(body).unwrap();
            assert_eq!(r.version, 287, "{body}");
        }
        for body in [
            r#"{"version":287.5}"#,
            r#"{"version":-1}"#,
            r#"{"version":"287"}"#,
        ] {
            assert!(serde_json::from_str::<RollbackTo>(body).is_err(), "{body}");
        }
    }
    use serde_json::json;

    #[test]
    fn a_diff_names_each_changed_field_once() {
        let before = json!({"enabled": true, "gray_percent": 10, "sku": "x"});
        let after = json!({"enabled": true, "gray_percent": 50, "shadow": ["user"], "sku": "x"});
        let changes = diff(Some(&before), &after);
        let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["gray_percent", "shadow"]);
        assert_eq!(changes[0].before, Some(json!(10)));
        assert_eq!(changes[1].before, None);
        assert_eq!(
            diff(None, &after).len(),
            4,
            "a first version changes every field"
        );
    }
}
