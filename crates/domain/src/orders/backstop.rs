//! The backstop for lost webhooks: the provider's `payment_intent.succeeded` events are read
//! from its events list, from a cursor kept in Postgres, every page of each run (the list is
//! newest first), each run starting a margin before the cursor so that events of the same
//! second are not missed; each event goes through the webhook's own idempotent path
//! ([`super::confirm`]), so one already taken changes nothing. A paid buyer's order is never
//! expired because the provider's delivery was lost or its endpoint disabled.

use std::collections::HashSet;

use serde::Serialize;

use super::{ConfirmOutcome, confirm, int, text};
use crate::checkout::{self, ProviderApi};
use crate::error::{Error, ErrorCode};
use crate::nodes::Nodes;
use crate::provider::{self, PaymentMode};
use crate::sql::{Param as P, Sql};
use crate::store::Store;

/// The events the backstop reads: the ones that pay orders.
const KIND: &str = "payment_intent.succeeded";

/// How far before the cursor each run starts reading.
const OVERLAP_S: u64 = 60;

/// Where a first run starts: a day back (Stripe lists 30 days of events).
const FIRST_LOOK_BACK_S: u64 = 86_400;

/// What a backstop run did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct BackstopReport {
    /// Pages of events read.
    pub pages: u64,
    /// Events read.
    pub events: u64,
    /// Events not taken before (their webhook was lost, late or not yet delivered).
    pub recovered: u64,
    /// Of those, orders they paid.
    pub paid: u64,
    /// Whether every page was read (the cursor moves only then).
    pub complete: bool,
    /// Why a page could not be read this run.
    pub error: Option<String>,
}

impl BackstopReport {
    /// A later run's report added to this one's (a job repeated for its time budget).
    pub(crate) fn add(&mut self, later: Self) {
        self.pages += later.pages;
        self.events += later.events;
        self.recovered += later.recovered;
        self.paid += later.paid;
        // Whether the last run read every page, and why not.
        self.complete = later.complete;
        self.error = later.error;
    }
}

/// Reads the provider's events since the cursor, up to `max_pages` pages, and applies each.
pub fn recover_events<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    api: &dyn ProviderApi,
    mode: PaymentMode,
    now_ms: u64,
    max_pages: u32,
) -> Result<BackstopReport, Error> {
    let cursor = db.query("SELECT created_s FROM provider_event_cursor", &[])?;
    let cursor = match cursor.rows.first() {
        Some(row) => u64::try_from(int(row, 0)?).map_err(Error::bug)?,
        None => (now_ms / 1000).saturating_sub(FIRST_LOOK_BACK_S),
    };
    let since = cursor.saturating_sub(OVERLAP_S);
    let mut report = BackstopReport::default();
    let (mut newest, mut after) = (cursor, None::<String>);
    while report.pages < u64::from(max_pages) {
        let page = match checkout::list_events(api, KIND, since, after.as_deref()) {
            Ok(page) => page,
            // The provider busy or down: the rest next run, from the same cursor; the run's
            // other work goes on.
            Err(e) if matches!(e.code(), ErrorCode::ProviderBusy | ErrorCode::Unavailable) => {
                report.error = Some(e.reason());
                return Ok(report);
            }
            Err(e) => return Err(e),
        };
        report.pages += 1;
        // Most were taken from their webhook: one query finds those, the rest are applied.
        let ids: Vec<String> = page.events.iter().map(|(id, _, _)| id.clone()).collect();
        let known: HashSet<String> = db
            .query(
                "SELECT provider_event_id FROM provider_events
                     WHERE provider_event_id = ANY($1)",
                &[P::ArrayStr(ids)],
            )?
            .rows
            .iter()
            .map(|row| text(row, 0))
            .collect::<Result<_, _>>()?;
        for (id, created, body) in &page.events {
            report.events += 1;
            newest = newest.max(*created);
            after = Some(id.clone());
            if known.contains(id) {
                continue;
            }
            let taken = confirm(nodes, db, &provider::parse(body), mode, now_ms)?;
            if taken.outcome != ConfirmOutcome::Duplicate {
                report.recovered += 1;
            }
            if taken.outcome == ConfirmOutcome::Paid {
                report.paid += 1;
            }
        }
        if !page.has_more || page.events.is_empty() {
            report.complete = true;
            break;
        }
    }
    if report.complete {
        db.execute(
            "INSERT INTO provider_event_cursor (one, created_s) VALUES (true, $1)
                 ON CONFLICT (one) DO UPDATE SET created_s = greatest(
                     provider_event_cursor.created_s, EXCLUDED.created_s)",
            &[P::Int64(newest as i64)],
        )?;
    }
    Ok(report)
}
