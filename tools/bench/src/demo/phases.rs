//! The sale's phases, one method each, in the order [`super::run`] plays them. Each records
//! when it begins (the chart's shaded bands) and tells its story on stdout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use seckill_testkit::jwt_for;
use serde_json::json;

use super::recorder::{Phase, say};
use super::setup::server_now_ms;
use super::{DemoArgs, EVENT, Sale, each, each_some, post};
use crate::load::Call;

/// A buyer holding an admission token.
#[derive(Clone)]
pub struct Admitted {
    pub user: String,
    pub jwt: String,
    pub admission: String,
}

/// An accepted order and the JWT of its buyer.
#[derive(Clone)]
pub struct Winner {
    pub jwt: String,
    pub order: String,
}

/// The first wave's winners, by user.
pub type Winners = HashMap<String, Winner>;

impl Sale {
    /// Before the sale, every buyer asks for an admission token (the cap is 10 × stock).
    pub async fn admission(&self, users: usize) -> Result<Vec<Admitted>> {
        self.enter(Phase::Admission);
        say(format_args!(
            "▶ {users} buyers ask for admission tokens before the sale…"
        ));
        let users: Vec<(String, String)> = (0..users)
            .map(|i| (format!("buyer{i}"), jwt_for(&format!("buyer{i}"))))
            .collect();
        let admitted = each_some(users, 64, |(user, jwt)| async move {
            let call = post(&self.hinted("admission"), &jwt, json!({}));
            let (status, body) = self.timed("admission", call).await?;
            let admission = body["admission_token"].as_str().unwrap_or_default();
            anyhow::Ok((status == 200).then(|| Admitted {
                admission: admission.to_owned(),
                user,
                jwt,
            }))
        })
        .await?;
        say(format_args!("  {} admitted", admitted.len()));
        Ok(admitted)
    }

    /// The countdown on server time until `start_ms` (the progress line shows it).
    pub async fn countdown(&self, start_ms: u64) -> Result<()> {
        self.enter(Phase::Countdown);
        loop {
            let now = server_now_ms(self.addr).await?;
            if now >= start_ms {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100.min(start_ms - now))).await;
        }
    }

    /// The spike: every admitted buyer clicks 1–3 times (precheck and buy each time) after
    /// 0–300 ms of jitter. Returns the winners.
    pub async fn buy_wave(&self, admitted: &[Admitted], stock: u64) -> Result<Winners> {
        self.enter(Phase::BuyWave);
        say(format_args!(
            "▶ the sale is open: spike of prechecks and buys (0–300 ms jitter, repeated clicks)"
        ));
        let winners: Arc<Mutex<Winners>> = Default::default();
        let mut tasks = Vec::new();
        for (i, buyer) in admitted.iter().cloned().enumerate() {
            let (sale, winners) = (self.clone(), winners.clone());
            // Deterministic, so that two runs send the same spike.
            let jitter = (i as u64 * 7_919) % 300;
            let clicks = 1 + (i % 3);
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(jitter)).await;
                for _ in 0..clicks {
                    let bought = sale.precheck_and_buy(&buyer.jwt, &buyer.admission).await?;
                    if let Some(order) = bought {
                        let jwt = buyer.jwt.clone();
                        let winner = Winner { jwt, order };
                        winners.lock().unwrap().insert(buyer.user.clone(), winner);
                    }
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let first_wave = winners.lock().unwrap().clone();
        say(format_args!(
            "  {} orders accepted for {stock} units",
            first_wave.len()
        ));
        Ok(first_wave)
    }

    /// Winners poll for their result every second until every order is confirmed in Postgres
    /// (the drain runs every second), 30 s at most.
    pub async fn poll(&self, first_wave: &Winners) -> Result<()> {
        self.enter(Phase::Polling);
        say(format_args!(
            "▶ winners poll for their result every second while the drain lands orders"
        ));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let states: Vec<String> = each(first_wave.values(), 64, |w| async move {
                let path = format!("/api/events/{EVENT}/{}", self.hinted("orders/me"));
                let (_, body) = self
                    .timed("poll", Call::get(path, Some(w.jwt.clone())))
                    .await?;
                let state = body["state"].as_str().or(body["status"].as_str());
                anyhow::Ok(state.unwrap_or("?").to_owned())
            })
            .await?;
            let confirmed = states.iter().filter(|s| *s == "confirmed").count();
            say(format_args!(
                "  confirmed {confirmed} / {}",
                first_wave.len()
            ));
            if confirmed == first_wave.len() || Instant::now() > deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// A `pay_share` of the winners pay; the others let their orders time out. Returns how
    /// many payments went through.
    pub async fn pay(&self, first_wave: &Winners, args: &DemoArgs) -> Result<usize> {
        let payers: Vec<&Winner> = first_wave
            .values()
            .enumerate()
            .filter(|(i, _)| (*i as f64) < first_wave.len() as f64 * args.pay_share)
            .map(|(_, w)| w)
            .collect();
        self.enter(Phase::Payment);
        say(format_args!(
            "▶ {} winners pay; the other {} let the {} s payment window pass",
            payers.len(),
            first_wave.len() - payers.len(),
            args.payment_timeout_s
        ));
        let paid = each(payers, 32, |w| async move {
            let call = post(&format!("orders/{}/pay", w.order), &w.jwt, json!({}));
            let (status, _) = self.timed("pay", call).await?;
            anyhow::Ok(status == 200)
        })
        .await?;
        Ok(paid.into_iter().filter(|p| *p).count())
    }

    /// The unpaid orders' payment window runs out, and the timeout-release job (every 5 s)
    /// puts their units back.
    pub async fn payment_window(&self, timeout_s: u64) {
        self.enter(Phase::PaymentWindow);
        tokio::time::sleep(Duration::from_secs(timeout_s + 6)).await;
    }

    /// The admitted buyers without an order click once more, for the released units. Returns
    /// the orders accepted.
    pub async fn resale(&self, admitted: &[Admitted], first_wave: &Winners) -> Result<Vec<String>> {
        let losers: Vec<&Admitted> = admitted
            .iter()
            .filter(|a| !first_wave.contains_key(&a.user))
            .collect();
        self.enter(Phase::Resale);
        say(format_args!(
            "▶ resale: {} buyers without an order try again",
            losers.len()
        ));
        let resold = each_some(losers, 64, |a| self.precheck_and_buy(&a.jwt, &a.admission)).await?;
        say(format_args!("  {} units resold", resold.len()));
        Ok(resold)
    }

    /// The drain lands the resale's orders.
    pub async fn settle(&self) {
        self.enter(Phase::Settle);
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}
