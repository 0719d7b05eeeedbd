//! Errors as Spin reports them: its `{:?}` error reports and its `query-failed` variants.

use super::bindings::spin::postgres::postgres as pg;

/// The error type `ToSql`/`FromSql` implementations return.
pub(super) type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// Formats an error the way Spin does (`{:?}` of an `anyhow::Error`: the message, then its
/// causes), but never with a backtrace: `RUST_BACKTRACE` must not change what the guest sees.
pub(super) fn error_report(e: &anyhow::Error) -> String {
    let mut report = e.to_string();
    let causes: Vec<_> = e.chain().skip(1).collect();
    if !causes.is_empty() {
        report.push_str("\n\nCaused by:");
    }
    let numbered = causes.len() > 1;
    for (n, cause) in causes.iter().enumerate() {
        let (first, rest) = if numbered {
            (format!("{n: >5}: "), "       ")
        } else {
            ("    ".to_owned(), "    ")
        };
        report.push('\n');
        report.push_str(&first);
        report.push_str(&cause.to_string().replace('\n', &format!("\n{rest}")));
    }
    report
}

/// Maps a tokio-postgres error to `query-failed`, structured when the server sent the error.
pub(super) fn query_failed(e: tokio_postgres::Error) -> pg::Error {
    let as_text = format!("{e:?}");
    let query_error = match e.as_db_error() {
        None => pg::QueryError::Text(as_text),
        Some(db_error) => pg::QueryError::DbError(pg::DbError {
            as_text,
            severity: db_error.severity().to_owned(),
            code: db_error.code().code().to_owned(),
            message: db_error.message().to_owned(),
            detail: db_error.detail().map(str::to_owned),
            extras: db_error_extras(db_error),
        }),
    };
    pg::Error::QueryFailed(query_error)
}

/// The fields of a server error that `db-error` has no field for, named as in Spin.
fn db_error_extras(e: &tokio_postgres::error::DbError) -> Vec<(String, String)> {
    let line = e.line().map(|line| line.to_string());
    [
        ("column", e.column()),
        ("constraint", e.constraint()),
        ("routine", e.routine()),
        ("hint", e.hint()),
        ("table", e.table()),
        ("datatype", e.datatype()),
        ("schema", e.schema()),
        ("file", e.file()),
        ("line", line.as_deref()),
        ("where_", e.where_()),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.to_owned(), value?.to_owned())))
    .collect()
}

/// Error reports, which need no server.
#[cfg(test)]
mod tests {
    use anyhow::anyhow;

    use super::*;

    /// Error reports are anyhow's `{:?}` layout, minus any backtrace.
    #[test]
    fn error_reports_match_anyhow_debug_without_backtrace() {
        let one = anyhow!("root").context("outer");
        assert_eq!(error_report(&one), "outer\n\nCaused by:\n    root");
        let two = anyhow!("root\nsecond line")
            .context("middle")
            .context("outer");
        assert_eq!(
            error_report(&two),
            "outer\n\nCaused by:\n    0: middle\n    1: root\n       second line"
        );
        assert_eq!(error_report(&anyhow!("alone")), "alone");
    }
}
