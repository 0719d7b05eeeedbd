//! The shop's systems: an order events endpoint registered before the sale (the kit's receiver,
//! over HTTPS under a public name, verifying every delivery with the Standard Webhooks
//! reference library), which answers its first delivery `503` as a shop's endpoint sometimes
//! does; after the sale, what it heard against what the outbox holds.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Result;
use seckill_testkit::{ADMIN_TOKEN, PgServer, ShopReceiver, TestCa};
use serde_json::{Value, json};

use crate::load::{Call, once, percentile};

/// The shop's public name: the test CA's certificate names it, and the host resolves it to
/// [`ADDRESS`] (`--resolve`, the demo's DNS record).
pub const NAME: &str = "shop.seckill.test";
/// The loopback address the shop listens on.
const ADDRESS: &str = "127.0.0.2";
/// How long after the sale the shop may take to hear the last events (the delivery job runs
/// every second; a failed delivery is tried again 5 s later).
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(30);

/// The shop's endpoint, alive for the whole run.
pub struct Shop {
    receiver: ShopReceiver,
}

impl Shop {
    /// Starts the receiver with `ca`'s certificate (which names [`NAME`]), and writes the
    /// host's runtime configuration (`[[client_tls]]`: `deliver-events` trusts `ca` for the
    /// shop) into `dir`; returns the host's extra arguments too.
    pub fn start(ca: &TestCa, dir: &Path) -> Result<(Shop, Vec<String>)> {
        let receiver = ShopReceiver::start_tls(ADDRESS, ca)?;
        std::fs::create_dir_all(dir)?;
        let config = dir.join("runtime-config.toml");
        std::fs::write(
            &config,
            format!(
                "[[client_tls]]\ncomponent_ids = [\"deliver-events\"]\nhosts = [\"{NAME}\"]\nca_roots_file = {:?}\n",
                ca.path("ca.pem")
            ),
        )?;
        let args = vec![
            "--runtime-config-file".to_owned(),
            config.display().to_string(),
            "--resolve".to_owned(),
            format!("{NAME}:{ADDRESS}"),
        ];
        Ok((Shop { receiver }, args))
    }

    /// Registers the endpoint on the host at `addr` as an operator does, and gives the shop its
    /// secret; the shop will answer its first delivery `503`.
    pub async fn register(&self, addr: SocketAddr) -> Result<()> {
        let url = self.receiver.endpoint(NAME, "/orders/events")?;
        let add = Call::post(
            "/admin/webhooks".to_owned(),
            Some(ADMIN_TOKEN.into()),
            &json!({ "url": url, "description": "the shop's fulfilment" }),
        );
        let (status, body) = once(addr, add).await?;
        let made: Value = serde_json::from_slice(&body)?;
        anyhow::ensure!(status == 201, "registering the shop: {status} {made}");
        let secret = made["secret"].as_str().unwrap_or_default().to_owned();
        tokio::task::block_in_place(|| {
            self.receiver.hold_secrets(&[&secret])?;
            self.receiver.answer_next(503, 1)
        })
    }

    /// What the shop heard, once it has heard every event in the outbox (or [`CATCH_UP`] has
    /// passed).
    pub async fn heard(&self, pg: &PgServer) -> Result<Heard> {
        let db = pg.client().await?;
        let started = std::time::Instant::now();
        loop {
            let outbox: i64 = db
                .query_one("SELECT count(*) FROM order_events", &[])
                .await?
                .get(0);
            let received = tokio::task::block_in_place(|| self.receiver.received())?;
            let mut ids: Vec<&str> = received
                .iter()
                .filter(|r| r.verified && (200..300).contains(&r.answered))
                .filter_map(|r| r.id.as_deref())
                .collect();
            let accepted = ids.len();
            ids.sort_unstable();
            ids.dedup();
            let caught_up = ids.len() as i64 >= outbox;
            if caught_up || started.elapsed() > CATCH_UP {
                let rows = db
                    .query(
                        "SELECT (d.attempted_ms + d.took_ms - e.created_ms)::bigint
                             FROM webhook_deliveries d JOIN order_events e USING (seq)
                             WHERE d.status BETWEEN 200 AND 299 AND NOT d.replay
                             ORDER BY 1",
                        &[],
                    )
                    .await?;
                let lag: Vec<u64> = rows
                    .iter()
                    .map(|r| r.get::<_, i64>(0).max(0) as u64)
                    .collect();
                let log = db
                    .query_one(
                        "SELECT count(*), count(*) FILTER (WHERE status IS NULL
                             OR status NOT BETWEEN 200 AND 299) FROM webhook_deliveries",
                        &[],
                    )
                    .await?;
                let (attempts, failed): (i64, i64) = (log.get(0), log.get(1));
                let by_type = db
                    .query(
                        "SELECT type, count(*) FROM order_events GROUP BY 1 ORDER BY 1",
                        &[],
                    )
                    .await?
                    .iter()
                    .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                    .collect();
                return Ok(Heard {
                    events: outbox as usize,
                    by_type,
                    delivered: ids.len(),
                    again: accepted - ids.len(),
                    unverified: received.iter().filter(|r| !r.verified).count(),
                    attempts: attempts as usize,
                    failed_attempts: failed as usize,
                    lag_ms: lag,
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }
}

/// What the shop heard of the order events.
pub struct Heard {
    /// Events in the outbox, and by type.
    events: usize,
    by_type: Vec<(String, i64)>,
    /// Distinct events the shop verified and accepted, and those it accepted again.
    delivered: usize,
    again: usize,
    /// Deliveries whose signature did not verify.
    unverified: usize,
    /// Attempts in the delivery log, and those the shop did not accept.
    attempts: usize,
    failed_attempts: usize,
    /// From each change to its delivery, sorted.
    lag_ms: Vec<u64>,
}

impl Heard {
    pub fn json(&self) -> Value {
        json!({
            "events": self.events, "by_type": self.by_type.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "delivered": self.delivered, "delivered_again": self.again,
            "unverified": self.unverified, "attempts": self.attempts,
            "retried_after_failure": self.failed_attempts,
            "lag_ms": { "p50": percentile(&self.lag_ms, 0.5), "p99": percentile(&self.lag_ms, 0.99),
                        "max": self.lag_ms.last() },
        })
    }

    pub fn line(&self) -> String {
        let at = |p: f64| percentile(&self.lag_ms, p).map_or("-".to_owned(), |ms| ms.to_string());
        let types: Vec<String> = self
            .by_type
            .iter()
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        format!(
            "order events to the shop: {} of {} delivered and verified ({}), {} again, {} unverified; {} attempts, {} failed and retried; lag from the change p50/p99/max {}/{}/{} ms",
            self.delivered,
            self.events,
            types.join(", "),
            self.again,
            self.unverified,
            self.attempts,
            self.failed_attempts,
            at(0.5),
            at(0.99),
            at(1.0),
        )
    }

    /// What must not be: an event the shop never heard, or one it could not verify.
    pub fn wrong(&self) -> Vec<String> {
        let mut wrong = Vec::new();
        if self.delivered < self.events {
            wrong.push(format!(
                "the shop heard {} of {} order events",
                self.delivered, self.events
            ));
        }
        if self.unverified > 0 {
            wrong.push(format!("{} deliveries did not verify", self.unverified));
        }
        wrong
    }
}
