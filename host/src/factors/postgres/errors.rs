//! Errors as Spin reports them: its `{:?}` error reports and its `query-failed` variants.

use super::bindings::spin::postgres::postgres as pg;

/// The error type `ToSql`/`FromSql` implementations return.
pub(super) type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// Formats an error the way Spin does (`{:?}` of an `anyhow::Error`: the message, then its
/// causes), but never with a backtrace: `RUST_BACKTRACE` must not change what the guest sees.
pub(super) fn error_report(e: &anyhow::Error) -> String {
    let mut chain = e.chain();
    let mut report = chain.next().map(in_spins_words).unwrap_or_default();
    let causes: Vec<_> = chain.map(in_spins_words).collect();
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
        report.push_str(&cause.replace('\n', &format!("\n{rest}")));
    }
    report
}

/// One error of a chain in the words of the crates Spin 3.6.3 builds (its `Cargo.lock`):
/// tokio-postgres 0.7.12, whose `Display` appends the error's cause (`error connecting to
/// server: Connection refused (os error 111)`; later versions leave the cause to `source()`),
/// also inside deadpool's `PoolError` around it; and uuid 1.11 ([`uuid_1_11`]).
fn in_spins_words(e: &(dyn std::error::Error + 'static)) -> String {
    use std::error::Error;
    type PoolError = deadpool_postgres::PoolError;
    if let Some(pg) = e.downcast_ref::<tokio_postgres::Error>() {
        return match pg.source() {
            Some(cause) => format!("{pg}: {cause}"),
            None => pg.to_string(),
        };
    }
    if let Some(PoolError::Backend(pg)) = e.downcast_ref::<PoolError>() {
        let pg: &(dyn Error + 'static) = pg;
        return format!(
            "Error occurred while creating a new object: {}",
            in_spins_words(pg)
        );
    }
    if let Some(invalid) = e.downcast_ref::<InvalidUuid>() {
        return invalid.0.clone();
    }
    e.to_string()
}

/// A UUID parameter that does not parse, worded as uuid 1.11's `parse_str` words it.
#[derive(Debug)]
pub(super) struct InvalidUuid(String);

impl std::fmt::Display for InvalidUuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidUuid {}

/// Parses `text` as uuid's `parse_str` does; a failure worded as uuid 1.11 words it (its
/// `InvalidUuid::into_err` and `Display`, `src/error.rs`), which later versions shortened.
pub(super) fn uuid_1_11(text: &str) -> Result<uuid::Uuid, InvalidUuid> {
    uuid::Uuid::parse_str(text).map_err(|_| InvalidUuid(uuid_1_11_error(text)))
}

fn uuid_1_11_error(input: &str) -> String {
    let (uuid, offset, simple) =
        if let Some(s) = input.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            (s, 1, false)
        } else if let Some(s) = input.strip_prefix("urn:uuid:") {
            (s, "urn:uuid:".len(), false)
        } else {
            (input, 0, true)
        };
    let mut hyphens = 0;
    let mut bounds = [0usize; 4];
    for (index, character) in uuid.char_indices() {
        if character == '-' {
            if hyphens < 4 {
                bounds[hyphens] = index;
            }
            hyphens += 1;
        } else if !character.is_ascii_hexdigit() {
            return format!(
                "invalid character: expected an optional prefix of `urn:uuid:` followed by \
                 [0-9a-fA-F-], found `{character}` at {}",
                index + offset + 1
            );
        }
    }
    if hyphens == 0 && simple {
        return format!(
            "invalid length: expected length 32 for simple format, found {}",
            input.len()
        );
    }
    if hyphens != 4 {
        return format!("invalid group count: expected 5, found {}", hyphens + 1);
    }
    const BLOCK_STARTS: [usize; 5] = [0, 9, 14, 19, 24];
    const EXPECTED: [usize; 5] = [8, 4, 4, 4, 12];
    for group in 0..4 {
        if bounds[group] != BLOCK_STARTS[group + 1] - 1 {
            return format!(
                "invalid group length in group {group}: expected {}, found {}",
                EXPECTED[group],
                bounds[group].wrapping_sub(BLOCK_STARTS[group])
            );
        }
    }
    // 1.11 counts the last group from the whole input, a prefix included.
    format!(
        "invalid group length in group 4: expected 12, found {}",
        input.len().wrapping_sub(BLOCK_STARTS[4])
    )
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

#[cfg(test)]
mod spins_words {
    use super::*;

    /// What uuid 1.11.0's `parse_str` answered for each input (run against that version).
    #[test]
    fn an_invalid_uuid_is_worded_as_uuid_1_11_words_it() {
        let expected = [
            (
                "nope",
                "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1",
            ),
            (
                "0123",
                "invalid length: expected length 32 for simple format, found 4",
            ),
            (
                "0123456789abcdef0123456789abcdeg",
                "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `g` at 32",
            ),
            ("{0123}", "invalid group count: expected 5, found 1"),
            (
                "urn:uuid:0123-45",
                "invalid group count: expected 5, found 2",
            ),
            (
                "01234567-89ab-cdef-0123-456789abcdef0",
                "invalid group length in group 4: expected 12, found 13",
            ),
            (
                "0123456-789ab-cdef-0123-456789abcdef",
                "invalid group length in group 0: expected 8, found 7",
            ),
            (
                "01234567-89ab-cdef-0123-456789abcde",
                "invalid group length in group 4: expected 12, found 11",
            ),
            (
                "urn:uuid:01234567-89ab-cdef-0123-456789abcdeff",
                "invalid group length in group 4: expected 12, found 22",
            ),
            (
                "01234567-89ab-cdef-0123-45678é",
                "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `é` at 30",
            ),
            (
                "a-b-c-d-e",
                "invalid group length in group 0: expected 8, found 1",
            ),
            (
                "{01234567-89ab-cdef-0123-456789abcdefg}",
                "invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `g` at 38",
            ),
        ];
        for (input, words) in expected {
            assert_eq!(uuid_1_11(input).unwrap_err().to_string(), words, "{input}");
        }
        assert!(uuid_1_11("01234567-89ab-cdef-0123-456789abcdef").is_ok());
    }

    /// tokio-postgres 0.7.12 (Spin 3.6.3's) appends the cause to its own words.
    #[tokio::test]
    async fn a_connection_error_names_its_cause_as_tokio_postgres_0_7_12_does() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = format!("host=127.0.0.1 port={port} user=x connect_timeout=5");
        let e = tokio_postgres::connect(&config, tokio_postgres::NoTls)
            .await
            .err()
            .expect("nothing listens there");
        let report = error_report(&anyhow::Error::new(e));
        let cause = "Connection refused (os error 111)";
        assert_eq!(
            report,
            format!("error connecting to server: {cause}\n\nCaused by:\n    {cause}")
        );
    }
}
