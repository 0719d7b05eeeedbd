//! The Dashboard in test mode, as far as a person trying the shop on one machine needs it: the
//! Checkout Sessions, the payments (with what was refunded of each) and the refunds, newest
//! first; and, for a paid session, a second payment naming the same order (what a buyer paying
//! twice produces; Stripe's test-mode Dashboard creates payments by hand likewise), so that
//! the shop's refund job can be watched paying it back.
//!
//! `GET /dashboard` shows it; `POST /dashboard/sessions/{id}/charge_again` charges the session's
//! amount once more and returns to it (303).

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use std::sync::Arc;

use super::hosted::{escape, redirect};
use super::sandbox::Inner;
use super::state::{SessionStatus, State, format_amount};

/// The path of the dashboard.
pub(crate) const PATH: &str = "/dashboard";

/// Answers a request under [`PATH`].
pub(crate) fn handle(inner: &Arc<Inner>, post: bool, path: &str) -> Response<Full<Bytes>> {
    let rest = path.strip_prefix(PATH).unwrap_or("");
    match (post, rest) {
        (false, "" | "/") => page(200, &inner.with_state(|s, _| overview(s))),
        (true, rest) => match rest
            .strip_prefix("/sessions/")
            .and_then(|r| r.strip_suffix("/charge_again"))
        {
            Some(id) => match inner.with_state(|s, now| charge_again(s, id, now)) {
                true => redirect(PATH),
                false => page(404, "<h1>No such paid Checkout Session</h1>"),
            },
            None => page(404, "<h1>Not found</h1>"),
        },
        _ => page(404, "<h1>Not found</h1>"),
    }
}

/// Charges complete session `id` again; false when there is no such session or it is not paid.
fn charge_again(s: &mut State, id: &str, now: i64) -> bool {
    let complete = s
        .sessions
        .get(id)
        .is_some_and(|x| x.status == SessionStatus::Complete);
    complete && s.charge_again(id, None, now).is_some()
}

/// The three tables, newest first.
fn overview(s: &State) -> String {
    let money = |minor: i64, currency: &str| escape(&format_amount(minor, currency, false));
    let sessions: String = s
        .sessions
        .rows
        .iter()
        .rev()
        .map(|x| {
            let again = match x.status {
                SessionStatus::Complete => format!(
                    "<form method=post action={PATH}/sessions/{id}/charge_again>\
                     <button type=submit>Charge again</button></form>",
                    id = escape(&x.id)
                ),
                _ => String::new(),
            };
            format!(
                "<tr data-session=\"{id}\"><td>{id}</td><td>{status}</td><td>{order}</td>\
                 <td>{total}</td><td>{pi}</td><td>{again}</td></tr>",
                id = escape(&x.id),
                status = x.status.as_str(),
                order = escape(x.client_reference_id.as_deref().unwrap_or("")),
                total = money(x.amount_total, &x.currency),
                pi = escape(x.payment_intent.as_deref().unwrap_or("")),
            )
        })
        .collect();
    let payments: String = s
        .intents
        .rows
        .iter()
        .rev()
        .map(|p| {
            let refunded = s.charges.get(&p.charge).map_or(0, |c| c.amount_refunded);
            format!(
                "<tr data-payment=\"{id}\"><td>{id}</td><td>{amount}</td>\
                 <td data-refunded={refunded}>{refunded_money}</td><td>{session}</td></tr>",
                id = escape(&p.id),
                amount = money(p.amount, &p.currency),
                refunded_money = money(refunded, &p.currency),
                session = escape(p.session.as_deref().unwrap_or("(outside Checkout)")),
            )
        })
        .collect();
    let refunds: String = s
        .refunds
        .rows
        .iter()
        .rev()
        .map(|r| {
            format!(
                "<tr data-refund=\"{id}\"><td>{id}</td><td>{pi}</td><td>{amount}</td>\
                 <td>{status}</td><td>{why}</td></tr>",
                id = escape(&r.id),
                pi = escape(&r.payment_intent),
                amount = money(r.amount, &r.currency),
                status = r.status.as_str(),
                why = escape(r.failure_reason.as_deref().unwrap_or("")),
            )
        })
        .collect();
    format!(
        "<h1>Stripe sandbox: test mode</h1><p>Nobody is charged. \
         <a href={PATH}>Refresh</a></p>\
         <h2>Checkout Sessions</h2><table id=sessions><tr><th>id</th><th>status</th>\
         <th>order</th><th>total</th><th>payment</th><th></th></tr>{sessions}</table>\
         <h2>Payments</h2><table id=payments><tr><th>id</th><th>amount</th><th>refunded</th>\
         <th>session</th></tr>{payments}</table>\
         <h2>Refunds</h2><table id=refunds><tr><th>id</th><th>payment</th><th>amount</th>\
         <th>status</th><th>failure</th></tr>{refunds}</table>"
    )
}

fn page(status: u16, body: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/html; charset=utf-8")
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(format!(
            "<!doctype html><html lang=en><meta charset=utf-8>\
             <title>Dashboard (Stripe sandbox)</title>\
             <body style=\"font-family:sans-serif;margin:2em\">{body}</body></html>"
        ))))
        .expect("a valid response")
}
