//! The suite's table: one row per measurement, printed as Markdown.

use crate::load::Report;

/// One line of the table.
pub struct Row {
    pub name: String,
    /// What the load generator measured; `None` for a figure from elsewhere (in the note).
    pub report: Option<Report>,
    pub note: String,
}

impl Row {
    /// A row the load generator measured.
    pub fn measured(name: impl Into<String>, report: Report, note: impl Into<String>) -> Self {
        Row {
            name: name.into(),
            report: Some(report),
            note: note.into(),
        }
    }

    /// A row whose figure is in its note only.
    pub fn noted(name: impl Into<String>, note: impl Into<String>) -> Self {
        Row {
            name: name.into(),
            report: None,
            note: note.into(),
        }
    }

    /// Requests per second; 0 for a row without a report.
    pub fn rps(&self) -> f64 {
        self.report.as_ref().map_or(0.0, Report::rps)
    }

    /// Requests answered; 0 for a row without a report.
    pub fn requests(&self) -> u64 {
        self.report.as_ref().map_or(0, |r| r.requests)
    }

    /// Appends `more` to the note, after a space.
    pub fn add_note(&mut self, more: &str) {
        self.note = format!("{} {more}", self.note);
    }

    /// The row's line of the table.
    fn line(&self) -> String {
        match &self.report {
            Some(rep) => format!(
                "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0}% | {} {:?} |",
                self.name,
                rep.rps(),
                rep.p50.as_secs_f64() * 1e3,
                rep.p95.as_secs_f64() * 1e3,
                rep.p99.as_secs_f64() * 1e3,
                rep.cpu_seconds / rep.elapsed.as_secs_f64() * 100.0,
                self.note,
                rep.statuses
            ),
            None => format!("| {} | | | | | | {} |", self.name, self.note),
        }
    }
}

/// Prints the table on stdout, after a blank line.
pub fn print(rows: &[Row]) {
    println!();
    println!("| row | req/s | p50 ms | p95 ms | p99 ms | gen CPU | note |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for r in rows {
        println!("{}", r.line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn report() -> Report {
        Report {
            requests: 1_000,
            statuses: BTreeMap::from([(202, 990), (409, 10)]),
            elapsed: Duration::from_secs(2),
            p50: Duration::from_micros(1_500),
            p95: Duration::from_micros(3_000),
            p99: Duration::from_micros(4_250),
            cpu_seconds: 0.5,
        }
    }

    /// A measured row: req/s, percentiles in ms, the generator's CPU as a share of wall time,
    /// then the note and the statuses.
    #[test]
    fn measured_row_line() {
        let row = Row::measured("buy", report(), "host CPU 80 µs/req;");
        assert_eq!(
            row.line(),
            "| buy | 500 | 1.50 | 3.00 | 4.25 | 25% | host CPU 80 µs/req; {202: 990, 409: 10} |"
        );
    }

    #[test]
    fn noted_row_line_leaves_the_figures_empty() {
        let row = Row::noted("raw Redis", "95102.00 req/s");
        assert_eq!(row.line(), "| raw Redis | | | | | | 95102.00 req/s |");
    }

    #[test]
    fn add_note_appends_after_a_space() {
        let mut row = Row::measured("buy", report(), "a;");
        row.add_note("0.50× hello;");
        assert_eq!(row.note, "a; 0.50× hello;");
    }

    #[test]
    fn a_row_without_report_has_no_requests() {
        let row = Row::noted("drain", "");
        assert_eq!((row.rps(), row.requests()), (0.0, 0));
        let row = Row::measured("buy", report(), "");
        assert_eq!((row.rps(), row.requests()), (500.0, 1_000));
    }
}
