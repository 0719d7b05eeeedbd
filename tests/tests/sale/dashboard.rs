//! The Grafana dashboard reads what a running app exports: scripts/check-dashboard.py over the
//! host's `/metrics` and the app's `/admin/metrics`, scraped after requests that give each
//! series a sample (a scrape leaves out a family that has none): a sale's orders and a refusal,
//! a provider's webhook, an order events endpoint, and a request the host shed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::future::join_all;
use reqwest::Method;
use seckill_host::runtime::overload::QueueControl;
use seckill_host::trigger::http::SHED_MESSAGE;
use seckill_host::trigger::metrics;
use seckill_testkit::{PgServer, RedisServer, TestApp, VIEWER_TOKEN, app_vars, repo_root};
use serde_json::json;

/// Runs the dashboard check over the scrapes in `files`; its verdict and what it printed.
fn check_dashboard(files: &[&Path]) -> Result<(bool, String)> {
    let out = Command::new("python3")
        .arg(repo_root().join("scripts/check-dashboard.py"))
        .arg("--exported")
        .args(files)
        .output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), said))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_reads_a_metric_the_running_app_exports_and_every_alert_has_its_panel()
-> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    // One instance, and no wait for it: a request that finds it busy is shed.
    let app = TestApp::builder(seckill_testkit::product_manifest())
        .vars(&app_vars(&redis, &pg))
        .max_instances(1)
        .queue_control(QueueControl::fixed(Duration::ZERO))
        .start()
        .await?;
    app.open_event(
        "watched",
        json!({ "stock": 1, "shards": 1, "gray_percent": 100 }),
    )
    .await?;
    let token = app
        .admit_and_precheck("watched", "w1")
        .await?
        .expect("admitted");
    assert_eq!(app.buy("watched", "w1", &token).await?.0, 202);
    // Sold out: refused, and counted.
    assert!(app.admit_and_precheck("watched", "w2").await?.is_err());
    // An endpoint for the order events, behind with the sale's.
    let hooks = json!({ "url": "https://shop.example.com/hooks" });
    let (status, body) = app
        .admin(Method::POST, "/admin/webhooks", Some(&hooks))
        .await?;
    assert_eq!(status, 201, "{body}");
    let provider = app.provider();
    let (_, event) = provider.succeeded_event("pay_unknown", 1999, "eur");
    let (status, body) = provider
        .attempt(&event, seckill_testkit::provider::unix_s())
        .await?;
    assert_eq!(status, 200, "{body}");
    let started = Instant::now();
    loop {
        let polls = (0..8).map(|_| app.call(Method::GET, "/api/time", None, None));
        let answers = join_all(polls).await;
        if answers
            .iter()
            .flatten()
            .any(|(status, body)| *status == 503 && body == SHED_MESSAGE)
        {
            break;
        }
        assert!(started.elapsed().as_secs() < 30, "nothing was shed");
    }

    let admin = app
        .http
        .get(format!("{}/admin/metrics", app.base_url))
        .bearer_auth(VIEWER_TOKEN)
        .send()
        .await?;
    assert_eq!(admin.status(), 200);
    let admin = admin.text().await?;
    // The host's scrape, served as `seckill-host up --metrics-listen` serves it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let at = listener.local_addr()?;
    let served = tokio::spawn(metrics::serve(app.metrics.clone(), listener));
    let host = reqwest::get(format!("http://{at}/metrics")).await?;
    assert_eq!(host.status(), 200);
    let host = host.text().await?;
    served.abort();

    let dir = tempfile::tempdir()?;
    let (host_file, admin_file) = (dir.path().join("host.txt"), dir.path().join("admin.txt"));
    std::fs::write(&host_file, &host)?;
    std::fs::write(&admin_file, &admin)?;
    let (ok, said) = check_dashboard(&[&host_file, &admin_file])?;
    assert!(ok, "{said}\nhost:\n{host}\napp:\n{admin}");
    // The check can fail: without the app's scrape, the event panels read nothing exported.
    let (ok, said) = check_dashboard(&[&host_file])?;
    assert!(!ok, "passed without /admin/metrics: {said}");
    assert!(
        said.contains("seckill_event_queued is not exported"),
        "{said}"
    );
    Ok(())
}
