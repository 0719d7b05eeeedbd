//! The sale's phases, one method each, in the order [`super::run`] plays them. Each records
//! when it begins (the chart's shaded bands) and tells its story on stdout. Within the buy
//! wave, every buyer lives their own sale ([`Sale::journey`]): clicks, retries as the
//! storefront makes them, and for a winner the poll and the payment, on their own clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use seckill_testkit::StripeSandbox;
use seckill_testkit::walk::{Answer, Buyer, Reply};

use super::recorder::{Phase, say};
use super::setup::server_now_ms;
use super::{DemoArgs, Sale, each};

/// After paying at the provider, the storefront polls the order this often until it is paid
/// (the provider's event, retried by the provider if it is shed), this many times at most.
const PAID_POLL_EVERY: Duration = Duration::from_millis(1_500);
const PAID_POLLS: u32 = 40;

/// A buyer holding an admission token.
#[derive(Clone)]
pub struct Admitted {
    pub buyer: Buyer,
    pub admission: String,
}

/// An accepted order: its buyer, whether they meant to pay and whether their payment went
/// through.
#[derive(Clone)]
pub struct Winner {
    pub order: String,
    /// `pay_share` of the winners mean to pay; the others let the window pass.
    pub payer: bool,
    /// The payment was accepted (`200`).
    pub paid: bool,
    /// When the buy was accepted.
    pub at: Instant,
    /// How long after the buy poll first showed the order in Postgres, if it did in time.
    pub landed_after: Option<Duration>,
    /// How long after the buy the payment was accepted.
    pub paid_after: Option<Duration>,
}

/// One in this many paid winners pays a second time.
const PAYS_TWICE_EVERY: usize = 25;
/// How long the settle phase waits for the second payments' refunds to show in polls.
const REFUND_WAIT: Duration = Duration::from_secs(60);

/// The first wave's winners, by user.
pub type Winners = HashMap<String, Winner>;

/// How many times a buyer tries one step (a click, a payment) when the answer says "come
/// back" (`503`, `429`) or no answer came, before they give up on it.
pub const TRIES: u32 = 8;

/// What one attempt at a step came to.
enum Step<T> {
    /// Done, with this.
    Done(T),
    /// Refused for good (sold out, already bought…): stop.
    Over,
    /// Come back later (`503`, `429`: with its `Retry-After` in seconds, if any), or no answer
    /// came.
    Later(Option<u64>),
}

impl<T> Step<T> {
    /// What a step of the walk came to, as the storefront reads it: done; "come back later"
    /// (`503`, `429`, with its `Retry-After`) or no answer (`Err`); over for anything else.
    fn of(answer: anyhow::Result<Answer<T>>) -> Self {
        match answer {
            Ok(Ok(t)) => Step::Done(t),
            Ok(Err(reply)) if reply.says_later() => Step::Later(reply.retry_after_s),
            Ok(Err(_)) => Step::Over,
            Err(_) => Step::Later(None),
        }
    }
}

/// How long the storefront waits before try `attempt + 1` (`web/common.js`, `backOffMs`): the
/// server's `Retry-After`, or a second doubled each try, at most 8 s, plus up to as long again
/// of jitter (from `seed`), so that a crowd told "come back" does not come back all at once.
fn back_off(retry_after_s: Option<u64>, attempt: u32, seed: u64) -> Duration {
    let base_ms = (retry_after_s.unwrap_or(0) * 1000)
        .max(1000 << attempt.min(3))
        .min(8000);
    let jitter = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(u64::from(attempt))
        % base_ms;
    Duration::from_millis(base_ms + jitter)
}

impl Sale {
    /// Before the sale, every buyer asks for an admission token (the cap is 10 × stock);
    /// returns the admitted.
    pub async fn admission(&self, users: usize) -> Vec<Admitted> {
        self.enter(Phase::Admission);
        say(format_args!(
            "▶ {users} buyers ask for admission tokens before the sale…"
        ));
        let users: Vec<(usize, String)> = (0..users).map(|i| (i, format!("buyer{i}"))).collect();
        let admitted: Vec<Admitted> = each(users, 64, |(i, user)| async move {
            let buyer = self.buyer(&user);
            // The storefront's way: a challenge, solved, then admission.
            let admission = self
                .retrying("admission", i as u64, || async {
                    Step::of(buyer.admission(self).await)
                })
                .await?;
            Some(Admitted { buyer, admission })
        })
        .await
        .into_iter()
        .flatten()
        .collect();
        say(format_args!("  {} admitted", admitted.len()));
        admitted
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

    /// The spike, and each winner's poll and payment: every admitted buyer starts after 0–300
    /// ms of jitter and lives their own sale ([`Self::journey`]). Returns the winners once
    /// every buyer is done.
    pub async fn buy_wave(&self, admitted: &[Admitted], args: &DemoArgs) -> Winners {
        self.enter(Phase::BuyWave);
        say(format_args!(
            "▶ the sale is open: a spike of prechecks and buys (0–300 ms jitter, repeated \
             clicks); each winner polls, then {:.0} % of them pay within their {} s",
            args.pay_share * 100.0,
            args.payment_timeout_s
        ));
        let mut tasks = Vec::new();
        for (i, buyer) in admitted.iter().cloned().enumerate() {
            let sale = self.clone();
            // Deterministic, so that two runs send the same spike.
            let jitter = Duration::from_millis((i as u64 * 7_919) % 300);
            let clicks = 1 + (i % 3);
            // Whether they mean to pay, by a hash of their place: the buyers who win come
            // mostly from those who clicked first, so a cut by place would not be pay_share.
            let draw = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
            let payer = (draw as f64 / (1u64 << 53) as f64) < args.pay_share;
            let window = Duration::from_secs(args.payment_timeout_s);
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(jitter).await;
                let won = sale.journey(i as u64, &buyer, clicks, payer, window).await;
                won.map(|w| (buyer.buyer.user, w))
            }));
        }
        let mut winners = Winners::new();
        for t in tasks {
            if let Ok(Some((user, w))) = t.await {
                winners.insert(user, w);
            }
        }
        let paid = winners.values().filter(|w| w.paid).count();
        let payers = winners.values().filter(|w| w.payer).count();
        say(format_args!(
            "  {} orders accepted for {} units; {paid} of {payers} payers paid",
            winners.len(),
            args.stock
        ));
        winners
    }

    /// One buyer's sale: `clicks` clicks (precheck, then buy; a `503` or no answer is clicked
    /// again after the back-off). A winner polls every 1–3 s until the order is in Postgres,
    /// then, if a payer, pays after a moment's thought, all within `window` of the buy.
    async fn journey(
        &self,
        seed: u64,
        buyer: &Admitted,
        clicks: usize,
        payer: bool,
        window: Duration,
    ) -> Option<Winner> {
        let mut won = None;
        for click in 0..clicks {
            if let Some(order) = self.click(seed + click as u64, buyer).await {
                won = Some(Winner {
                    order,
                    payer,
                    paid: false,
                    at: Instant::now(),
                    landed_after: None,
                    paid_after: None,
                });
            }
        }
        let mut won = won?;
        let deadline = won.at + window;
        if self.landed(seed, &buyer.buyer, &won.order, deadline).await {
            won.landed_after = Some(won.at.elapsed());
            // A moment to read the page and press "pay": 0.5–2 s.
            let reading = Duration::from_millis(500 + seed * 6_007 % 1_500);
            if payer {
                tokio::time::sleep(reading).await;
                won.paid = self.pay(seed, &buyer.buyer, &won.order).await;
                won.paid_after = won.paid.then(|| won.at.elapsed());
            } else if seed.is_multiple_of(2) {
                // Half of those who will not pay open the checkout and walk away: its session
                // stays open at the provider until timeout release expires it.
                tokio::time::sleep(reading).await;
                let _ = buyer.buyer.start_payment(self, &won.order).await;
            }
        }
        Some(won)
    }

    /// One click: precheck, then buy with the purchase token, each retried as the storefront
    /// retries (the purchase token stays valid over a `503`: the same click goes on). Returns
    /// the order id on a `202`.
    async fn click(&self, seed: u64, admitted: &Admitted) -> Option<String> {
        let buyer = &admitted.buyer;
        let token = self
            .retrying("precheck", seed, || async {
                Step::of(buyer.precheck(self, &admitted.admission).await)
            })
            .await?;
        self.retrying("buy", seed, || async {
            Step::of(buyer.buy(self, &token).await)
        })
        .await
    }

    /// Polls every 1–3 s until `order` is in Postgres (poll shows its state); `false` if the
    /// `deadline` passed first.
    async fn landed(&self, seed: u64, buyer: &Buyer, order: &str, deadline: Instant) -> bool {
        let mut n = 0;
        while Instant::now() < deadline {
            n += 1;
            tokio::time::sleep(Duration::from_millis(1_000 + (seed + n) * 4_001 % 2_000)).await;
            if let Ok(Reply {
                status: 200, body, ..
            }) = buyer.poll(self).await
                && body["status"] == "order"
                && body["order_id"] == order
            {
                return true;
            }
        }
        false
    }

    /// Pays for `order` as the storefront does: the pay route opens the checkout (retried as
    /// the storefront retries it), the buyer presses Pay on the provider's page, and the
    /// storefront polls until the provider's event has paid the order; `true` if it did.
    async fn pay(&self, seed: u64, buyer: &Buyer, order: &str) -> bool {
        let payment = self
            .retrying("pay", seed, || async {
                Step::of(buyer.start_payment(self, order).await)
            })
            .await;
        let Some(payment) = payment else {
            return false;
        };
        if payment["status"] == "succeeded" {
            return true;
        }
        let Some(checkout) = payment["checkout_url"].as_str() else {
            eprintln!("no checkout for {order}: {payment}");
            return false;
        };
        match self.browser.post(checkout).send().await {
            Ok(r) if r.status().is_redirection() || r.status().is_success() => {}
            Ok(r) => {
                eprintln!("the provider refused to charge {order}: {}", r.status());
                return false;
            }
            Err(e) => {
                eprintln!("the provider's page did not answer for {order}: {e}");
                return false;
            }
        }
        for _ in 0..PAID_POLLS {
            if let Ok(Reply {
                status: 200, body, ..
            }) = buyer.poll(self).await
                && body["order_id"] == order
                && body["state"] == "paid"
            {
                return true;
            }
            tokio::time::sleep(PAID_POLL_EVERY).await;
        }
        false
    }

    /// Runs `attempt` at `endpoint` until it is done or over, backing off between tries as the
    /// storefront does ([`back_off`], jittered by `seed`), at most [`TRIES`] times; a buyer
    /// who runs out of tries gives up (counted).
    async fn retrying<T, F, Fut>(
        &self,
        endpoint: &'static str,
        seed: u64,
        mut attempt: F,
    ) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Step<T>>,
    {
        for n in 0..TRIES {
            match attempt().await {
                Step::Done(t) => return Some(t),
                Step::Over => return None,
                Step::Later(after) => tokio::time::sleep(back_off(after, n, seed)).await,
            }
        }
        self.rec.lock().unwrap().record_gave_up(endpoint);
        None
    }

    /// The unpaid orders' payment window runs out (the last one `timeout_s` after its buy),
    /// and the timeout-release job (every 5 s) puts their units back.
    pub async fn payment_window(&self, first_wave: &Winners, timeout_s: u64) {
        self.enter(Phase::PaymentWindow);
        let unpaid = first_wave.values().filter(|w| !w.paid).count();
        say(format_args!(
            "▶ {unpaid} unpaid orders wait out their {timeout_s} s window; then their units are released"
        ));
        let last = first_wave.values().map(|w| w.at).max();
        if let Some(last) = last {
            let released = last + Duration::from_secs(timeout_s + 6);
            tokio::time::sleep_until(released.into()).await;
        }
    }

    /// The admitted buyers without an order click once more, for the released units. Returns
    /// the orders accepted.
    pub async fn resale(&self, admitted: &[Admitted], first_wave: &Winners) -> Vec<String> {
        let losers: Vec<(u64, &Admitted)> = admitted
            .iter()
            .enumerate()
            .filter(|(_, a)| !first_wave.contains_key(&a.buyer.user))
            .map(|(i, a)| (i as u64, a))
            .collect();
        self.enter(Phase::Resale);
        say(format_args!(
            "▶ resale: {} buyers without an order try again",
            losers.len()
        ));
        let resold: Vec<String> = each(losers, 64, |(i, a)| self.click(i, a))
            .await
            .into_iter()
            .flatten()
            .collect();
        say(format_args!("  {} units resold", resold.len()));
        resold
    }

    /// The drain lands the resale's orders.
    pub async fn settle(&self, paid_twice: &[(String, String)]) -> usize {
        self.enter(Phase::Settle);
        tokio::time::sleep(Duration::from_secs(3)).await;
        self.refunds_shown(paid_twice).await
    }

    /// One in [`PAYS_TWICE_EVERY`] paid winners pays their order a second time (another tab, a
    /// bank's retry): the provider charges the order's checkout session again. The refund job
    /// pays it back. Returns their users and orders.
    pub fn pay_twice(
        &self,
        provider: &StripeSandbox,
        first_wave: &Winners,
    ) -> Vec<(String, String)> {
        let mut paid: Vec<(&String, &Winner)> = first_wave.iter().filter(|(_, w)| w.paid).collect();
        paid.sort_by_key(|(user, _)| *user);
        let sessions = provider.sessions();
        let twice: Vec<(String, String)> = paid
            .into_iter()
            .step_by(PAYS_TWICE_EVERY)
            .filter_map(|(user, won)| {
                let session = sessions.iter().find(|s| {
                    s.client_reference_id.as_deref() == Some(won.order.as_str())
                        && s.status == "complete"
                })?;
                match provider.charge_again(&session.id, None) {
                    Ok(_) => Some((user.clone(), won.order.clone())),
                    Err(e) => {
                        eprintln!("the provider did not charge {} again: {e}", won.order);
                        None
                    }
                }
            })
            .collect();
        say(format_args!(
            "  {} payers paid their order a second time; the refund job pays it back",
            twice.len()
        ));
        twice
    }

    /// How many of `paid_twice`'s buyers see their second payment refunded when they poll
    /// (the refund job runs with timeout release, every 5 s), waiting at most a minute.
    async fn refunds_shown(&self, paid_twice: &[(String, String)]) -> usize {
        let deadline = Instant::now() + REFUND_WAIT;
        let mut shown = 0;
        for (user, order) in paid_twice {
            let buyer = self.buyer(user);
            loop {
                if let Ok(Reply {
                    status: 200, body, ..
                }) = buyer.poll(self).await
                    && body["order_id"] == order.as_str()
                    && body["refund"]["state"] == "refunded"
                {
                    shown += 1;
                    break;
                }
                if Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(PAID_POLL_EVERY).await;
            }
        }
        shown
    }
}
