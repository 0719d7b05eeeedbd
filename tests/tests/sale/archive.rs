//! Archiving an event: an operator archives an ended event (a recorded write, like the others),
//! the operators' list says so, and unarchiving brings it back. A live sale, a viewer, an
//! unknown event are refused and change nothing.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{OPERATOR, VIEWER, VIEWER_TOKEN};
use serde_json::{Value, json};

use crate::{code, epoch_ms, start};

/// The operators' list entry of `event`.
async fn listed(app: &seckill_testkit::TestApp, event: &str) -> Result<Value> {
    let (status, list) = app.admin(Method::GET, "/admin/events", None).await?;
    anyhow::ensure!(status == 200, "list: {status} {list}");
    let found = list["events"]
        .as_array()
        .and_then(|events| events.iter().find(|e| e["event_id"] == event).cloned());
    found.ok_or_else(|| anyhow::anyhow!("{event} not listed: {list}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_event_is_archived_and_back_by_an_operator_and_recorded() -> Result<()> {
    let (_redis, pg, app) = start().await?;
    pg.migrate().await?;
    let now = epoch_ms()?;
    app.open_event("live", json!({})).await?;
    app.open_event(
        "done",
        json!({ "start_ms": now - 20_000, "end_ms": now - 10_000 }),
    )
    .await?;
    let done = listed(&app, "done").await?;
    assert_eq!(
        done,
        json!({ "event_id": "done", "archived": false, "sku": "sku-done",
                "start_ms": now - 20_000, "end_ms": now - 10_000 })
    );

    // Refused, changing nothing: a sale not ended yet, a viewer, an unknown event, a method.
    let (status, body) = app
        .admin(Method::POST, "/admin/events/live/archive", None)
        .await?;
    assert_eq!((status, code(&body)), (409, "conflict"), "{body}");
    assert_eq!(listed(&app, "live").await?["archived"], false);
    let (status, body) = app
        .call(
            Method::POST,
            "/admin/events/done/archive",
            Some(VIEWER_TOKEN),
            None,
        )
        .await?;
    assert_eq!((status, code(&body)), (403, "forbidden"));
    assert_eq!(listed(&app, "done").await?["archived"], false);
    let (status, body) = app
        .admin(Method::POST, "/admin/events/nope/archive", None)
        .await?;
    assert_eq!((status, code(&body)), (404, "event_not_found"));
    let (status, body) = app
        .admin(Method::PUT, "/admin/events/done/archive", None)
        .await?;
    assert_eq!((status, code(&body)), (405, "method_not_allowed"));

    // Archived (twice: the same outcome), then brought back.
    for _ in 0..2 {
        let (status, body) = app
            .admin(Method::POST, "/admin/events/done/archive", None)
            .await?;
        assert_eq!(
            (status, body),
            (200, json!({ "event_id": "done", "archived": true }))
        );
        assert_eq!(listed(&app, "done").await?["archived"], true);
    }
    assert_eq!(listed(&app, "live").await?["archived"], false);
    let (status, body) = app
        .admin(Method::DELETE, "/admin/events/done/archive", None)
        .await?;
    assert_eq!(
        (status, body),
        (200, json!({ "event_id": "done", "archived": false }))
    );
    assert_eq!(listed(&app, "done").await?, done);

    // The audit: who, what, before → after, newest first; the viewer's refusal included.
    let (status, audit) = app
        .admin(Method::GET, "/admin/audit?event=done&limit=10", None)
        .await?;
    assert_eq!(status, 200, "{audit}");
    let records: Vec<(&str, &str, i64, &Value, &Value)> = audit["records"]
        .as_array()
        .map(|r| r.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|r| r["path"] == "/admin/events/done/archive")
        .map(|r| {
            (
                r["operator"].as_str().unwrap_or("?"),
                r["method"].as_str().unwrap_or("?"),
                r["status"].as_i64().unwrap_or(0),
                &r["before"]["archived"],
                &r["after"]["archived"],
            )
        })
        .collect();
    let (t, f, null) = (json!(true), json!(false), Value::Null);
    assert_eq!(
        records,
        [
            (OPERATOR, "DELETE", 200, &t, &f),
            (OPERATOR, "POST", 200, &t, &t),
            (OPERATOR, "POST", 200, &f, &t),
            (VIEWER, "POST", 403, &null, &null),
        ]
    );
    Ok(())
}
