//! The spike: a crowd arriving at [`OVERLOAD`] × the poll's sustained rate, [`READS_PER_BUY`]
//! polls to each buy (fresh buyers of an open event), and beside it a steady trickle of
//! critical requests: the payment provider's signed webhook deliveries (for payments the app
//! does not know: it takes them and changes nothing) and the drain job (an operator's bearer),
//! [`CRITICAL_RATE`] a second each, each on a connection of its own (they come from other
//! clients than the crowd). Every request is due at a fixed time whatever the host does. It
//! runs twice: the crowd with a connection per request (as a crowd of browsers arrives), then
//! over a pool of [`POOL`] keep-alive connections, each request on the first that is free (as a
//! CDN or a load balancer talks to the origin).
//!
//! Per request class, as the manifest declares it (`seckill_host::trigger::classes::Classifier`: the
//! bench names no class of its own): what was sent; the share answered and how fast, from the
//! due time and from the moment the client began sending; the share shed (the host's `503` +
//! `Retry-After`, never run) and how fast, and where a shed answer's time went: before the
//! client began sending (the generator's own scheduling on the cores it shares with the host,
//! or waiting for a free pooled connection), the host's part (`Server-Timing`'s `host`: from
//! its accept, or the request head's first byte on a kept-alive connection, to the answer), of
//! which until the head was read whole (`head`: the client sending it, the host's front reading
//! it) and waiting in its slot queue (`queue`), and the rest (connecting, the listen backlog
//! before the host's accept, the transfer); and the requests that got no response (the goal is
//! none). Then how many critical requests were shed, and how many of them while a lower class
//! was being served (the host's promise is none).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use http::Method;

use seckill_domain::event::EventId;
use seckill_host::runtime::overload::Class;
use seckill_host::trigger::classes::Classifier;
use seckill_testkit::provider::{signature, unix_s};
use seckill_testkit::{
    ADMIN_TOKEN, PAYMENT_WEBHOOK_SECRET, PgServer, Provider, RedisServer, jwt_for,
};

use crate::fixture::{Buyer, open_event, polls, prepare_buyers};
use crate::load::{Answer, Call, Calls, Conn, ServerTiming, percentile, send};
use crate::measure::endpoint_row;
use crate::options::SuiteArgs;
use crate::server::HostProcess;
use crate::table::Row;

/// The manifest the spike's hosts run, whose request classes sort what it sends.
const MANIFEST: &str = "spin.toml";
/// The crowd's arrival rate over what the host sustains of polls.
const OVERLOAD: f64 = 3.0;
/// Polls to each buy in the crowd.
const READS_PER_BUY: u64 = 3;
/// Webhook deliveries per second, and as many drain jobs, beside the crowd.
const CRITICAL_RATE: f64 = 20.0;
/// How long the crowd keeps arriving, at most.
const SPIKE: Duration = Duration::from_secs(3);
/// At most this many requests in the run with a connection each (the client's ports are
/// finite: each closed connection holds one for a minute).
const MAX_CONNECTIONS: usize = 15_000;
/// At most this many requests in the run over keep-alive connections.
const MAX_POOLED: usize = 40_000;
/// The keep-alive connections of the pooled run: twice the host's default instance slots on
/// two cores (64 per core). The host sees at most this many requests at once; the rest of the
/// overload waits for a free connection, as it would in a proxy's pool (`before sending`).
const POOL: usize = 256;
/// How long a client waits for an answer before it counts as dropped.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The poll's rows on a host of its own (`--only spike`): its sustained rate in closed loop,
/// then the spike's two runs (the webhook and the drain job write to `pg`, migrated here).
pub async fn rows(
    redis: &RedisServer,
    pg: &PgServer,
    vars: &[(&'static str, String)],
    args: &SuiteArgs,
) -> Result<Vec<Row>> {
    pg.migrate().await?;
    let host = HostProcess::start(MANIFEST, vars, false)?;
    let event = open_event(redis, "spike", 1_000_000)?;
    let pollers: Vec<Buyer> = (0..10_000)
        .map(|i| Buyer {
            jwt: jwt_for(&format!("s{i}")),
            token: String::new(),
        })
        .collect();
    let calls = polls(&event, &pollers);
    let sustained = endpoint_row("poll end to end", host.addr, redis, args, calls.clone()).await?;
    let rps = sustained.rps();
    let mut rows = vec![sustained];
    rows.extend(runs(host.addr, redis, &event, calls, rps).await?);
    Ok(rows)
}

/// The spike's two runs on the host at `addr`: `polls` and buys of fresh buyers of `event`
/// arriving at [`OVERLOAD`] × `sustained_rps`, with the critical trickle beside them.
pub async fn runs(
    addr: SocketAddr,
    redis: &RedisServer,
    event: &EventId,
    polls: Calls,
    sustained_rps: f64,
) -> Result<Vec<Row>> {
    let rate = (sustained_rps * OVERLOAD).max(1.0);
    let modes = [Mode::Connections, Mode::Pooled(POOL)];
    let sizes: Vec<usize> = modes.iter().map(|m| crowd_size(rate, m.max())).collect();
    let buys: usize = sizes.iter().map(|n| buys_in(*n)).sum();
    eprintln!("preparing {buys} buyers for the spike…");
    let mut buyers = prepare_buyers(redis, event, buys, "spike")?.into_iter();
    let plan = Planner::new(event, polls)?;
    let mut rows = Vec::new();
    for (mode, size) in modes.into_iter().zip(sizes) {
        let buyers: Vec<Buyer> = buyers.by_ref().take(buys_in(size)).collect();
        let planned = plan.plan(rate, size, &buyers)?;
        let outcomes = run(addr, &mode, planned).await?;
        rows.extend(report(&mode, rate, size, &outcomes));
    }
    Ok(rows)
}

/// How the requests reach the host.
enum Mode {
    /// A new connection for each request.
    Connections,
    /// Over this many keep-alive connections, each request on the first that is free.
    Pooled(usize),
}

impl Mode {
    /// The most requests a run of this mode sends.
    fn max(&self) -> usize {
        match self {
            Mode::Connections => MAX_CONNECTIONS,
            Mode::Pooled(_) => MAX_POOLED,
        }
    }

    fn label(&self) -> String {
        match self {
            Mode::Connections => "a connection each".to_owned(),
            Mode::Pooled(n) => format!("{n} keep-alive connections"),
        }
    }
}

/// The crowd's requests in a run of at most `max` requests at `rate` (the critical trickle
/// beside it is a few per cent of that).
fn crowd_size(rate: f64, max: usize) -> usize {
    let critical_share = 2.0 * CRITICAL_RATE / rate;
    ((rate * SPIKE.as_secs_f64()) as usize).min((max as f64 / (1.0 + critical_share)) as usize)
}

/// The buys among a crowd of `n`: one in [`READS_PER_BUY`] + 1.
fn buys_in(n: usize) -> usize {
    n / (READS_PER_BUY as usize + 1)
}

/// One request of a run.
struct Planned {
    what: What,
    call: Call,
    /// Sent on a connection of its own whatever the run's mode.
    own_connection: bool,
}

/// What a request is, for the report.
#[derive(Clone, Copy)]
struct What {
    /// `poll`, `buy`, `webhook`, `drain job`.
    kind: &'static str,
    class: Class,
    /// Since the run's start.
    due: Duration,
}

impl What {
    /// What became of it: sent at `sent`, its answer having come (or not) now.
    fn outcome(self, fate: Fate, start: Instant, sent: Instant) -> Outcome {
        Outcome {
            kind: self.kind,
            class: self.class,
            due: self.due,
            sent: sent.saturating_duration_since(start),
            done: start.elapsed(),
            fate,
        }
    }
}

/// Makes a run's requests and sorts them by class.
struct Planner {
    classifier: Classifier,
    polls: Calls,
    buy_path: String,
    /// Makes the provider's events (it delivers none itself here).
    provider: Provider,
}

impl Planner {
    fn new(event: &EventId, polls: Calls) -> Result<Self> {
        let manifest = seckill_testkit::repo_root().join(MANIFEST);
        Ok(Planner {
            classifier: Classifier::load(&manifest)?,
            polls,
            buy_path: format!("/api/events/{}/buy", event.as_str()),
            provider: Provider::new(reqwest::Client::new(), "", PAYMENT_WEBHOOK_SECRET),
        })
    }

    /// `kind` sending `call`, due at `due`, with the class the host will give it.
    fn planned(&self, due: Duration, kind: &'static str, call: Call) -> Result<Planned> {
        let class = self
            .classifier
            .classify(&call.method, call.route_path())
            .with_context(|| format!("{MANIFEST} routes no {} {}", call.method, call.path))?;
        Ok(Planned {
            what: What { kind, class, due },
            call,
            own_connection: false,
        })
    }

    /// A crowd of `size` at `rate` (one in [`READS_PER_BUY`] + 1 a buy by the next of
    /// `buyers`, the others polls), and the critical trickle over the same time, in due order.
    fn plan(&self, rate: f64, size: usize, buyers: &[Buyer]) -> Result<Vec<Planned>> {
        let mut planned = Vec::new();
        let mut buyers = buyers.iter();
        for i in 0..size as u64 {
            let due = Duration::from_secs_f64(i as f64 / rate);
            let buyer = (i % (READS_PER_BUY + 1) == READS_PER_BUY)
                .then(|| buyers.next())
                .flatten();
            planned.push(match buyer {
                Some(b) => self.planned(due, "buy", Call::buy(&self.buy_path, &b.jwt, &b.token))?,
                None => {
                    let poll = (self.polls)(i).context("a poll for every request")?;
                    self.planned(due, "poll", poll)?
                }
            });
        }
        // Webhook deliveries and drain jobs take turns, each at CRITICAL_RATE.
        let spike = size as f64 / rate;
        let critical = ((spike * CRITICAL_RATE * 2.0).ceil() as u64).max(2);
        for j in 0..critical {
            let due = Duration::from_secs_f64(j as f64 / (CRITICAL_RATE * 2.0));
            let mut p = if j % 2 == 0 {
                self.planned(due, "webhook", self.webhook(j))?
            } else {
                let drain =
                    Call::empty(Method::POST, "/admin/jobs/drain", Some(ADMIN_TOKEN.into()));
                self.planned(due, "drain job", drain)?
            };
            p.own_connection = true;
            planned.push(p);
        }
        planned.sort_by_key(|p| p.what.due);
        Ok(planned)
    }

    /// A delivery of `payment_intent.succeeded` for a payment the app does not know (it takes
    /// it and changes nothing), signed as the provider signs it.
    fn webhook(&self, j: u64) -> Call {
        let (_, body) = self
            .provider
            .succeeded_event(&format!("pay_spike_{j}"), 1999, "eur");
        let header = signature(&[PAYMENT_WEBHOOK_SECRET], unix_s(), &body);
        Call::webhook(body, header)
    }
}

/// What became of one request.
struct Outcome {
    kind: &'static str,
    class: Class,
    /// Since the run's start: when it was due, when the client began sending it (connecting,
    /// or writing it on a pooled connection), when its answer (or the end of waiting for one)
    /// came.
    due: Duration,
    sent: Duration,
    done: Duration,
    fate: Fate,
}

enum Fate {
    /// Answered (anything but the host's shed answer), with this status.
    Answered(u16),
    /// The host's `503`: its `Server-Timing`.
    Shed(ServerTiming),
    /// No response.
    Dropped,
}

impl Fate {
    fn of(answer: Result<Result<Answer>, tokio::time::error::Elapsed>) -> Self {
        match answer {
            Ok(Ok(answer)) if answer.is_shed() => Fate::Shed(answer.timing),
            Ok(Ok(answer)) => Fate::Answered(answer.status),
            _ => Fate::Dropped,
        }
    }
}

/// The run's start: a moment from now, so that the first requests are not late already.
fn start_soon() -> Instant {
    Instant::now() + Duration::from_millis(20)
}

/// Sends each planned request at its due time: the crowd's as `mode` says, the critical
/// trickle's on a connection each (they come from other clients: the provider, the scheduler).
async fn run(addr: SocketAddr, mode: &Mode, planned: Vec<Planned>) -> Result<Vec<Outcome>> {
    let pool = match mode {
        Mode::Connections => None,
        Mode::Pooled(n) => Some(Pool::open(addr, *n).await?),
    };
    let start = start_soon();
    let mut alone = Vec::new();
    for p in planned {
        tokio::time::sleep_until((start + p.what.due).into()).await;
        match &pool {
            Some(pool) if !p.own_connection => pool.send(p, start)?,
            _ => alone.push(tokio::spawn(async move {
                let sent = Instant::now();
                let answer = tokio::time::timeout(CLIENT_TIMEOUT, send(addr, p.call)).await;
                p.what.outcome(Fate::of(answer), start, sent)
            })),
        }
    }
    let mut outcomes = match pool {
        Some(pool) => pool.close().await?,
        None => Vec::new(),
    };
    for t in alone {
        outcomes.push(t.await?);
    }
    Ok(outcomes)
}

/// Keep-alive connections, each taking the next request due (in due order) as soon as it is
/// free; a connection that fails is opened anew for its next request.
struct Pool {
    queue: tokio::sync::mpsc::UnboundedSender<(Planned, Instant)>,
    workers: Vec<tokio::task::JoinHandle<Vec<Outcome>>>,
}

impl Pool {
    async fn open(addr: SocketAddr, n: usize) -> Result<Self> {
        let (queue, rx) = tokio::sync::mpsc::unbounded_channel::<(Planned, Instant)>();
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let mut workers = Vec::with_capacity(n);
        for _ in 0..n {
            let mut conn = Some(Conn::open(addr).await?);
            let rx = rx.clone();
            workers.push(tokio::spawn(async move {
                let mut outcomes = Vec::new();
                loop {
                    let Some((p, start)) = rx.lock().await.recv().await else {
                        return outcomes;
                    };
                    let sent = Instant::now();
                    if conn.is_none() {
                        conn = Conn::open(addr).await.ok();
                    }
                    let fate = match conn.as_mut() {
                        Some(c) => {
                            Fate::of(tokio::time::timeout(CLIENT_TIMEOUT, c.ask(p.call)).await)
                        }
                        None => Fate::Dropped,
                    };
                    if matches!(fate, Fate::Dropped) {
                        conn = None;
                    }
                    outcomes.push(p.what.outcome(fate, start, sent));
                }
            }));
        }
        Ok(Pool { queue, workers })
    }

    /// Queues `p` for the first free connection.
    fn send(&self, p: Planned, start: Instant) -> Result<()> {
        self.queue
            .send((p, start))
            .ok()
            .context("the pool's connections are gone")
    }

    /// Waits for every queued request's outcome.
    async fn close(self) -> Result<Vec<Outcome>> {
        drop(self.queue);
        let mut outcomes = Vec::new();
        for w in self.workers {
            outcomes.extend(w.await?);
        }
        Ok(outcomes)
    }
}

/// What one class got in a run.
#[derive(Default)]
struct Figures {
    /// What it sent, each with its answers' times from sending.
    kinds: BTreeMap<&'static str, Vec<Duration>>,
    sent: usize,
    /// An answer's time from the due time, and from the moment the client began sending.
    answered: Vec<Duration>,
    answered_sending: Vec<Duration>,
    statuses: BTreeMap<u16, u64>,
    shed: Vec<Duration>,
    /// Where a shed answer's time went: before the client began sending it, at the host (of
    /// which reading its head and in its queue), and the rest.
    before: Vec<Duration>,
    host: Vec<Duration>,
    head: Vec<Duration>,
    queue: Vec<Duration>,
    wire: Vec<Duration>,
    dropped: usize,
}

impl Figures {
    fn of(outcomes: &[Outcome], class: Class) -> Self {
        let mut f = Figures::default();
        for o in outcomes.iter().filter(|o| o.class == class) {
            let by_kind = f.kinds.entry(o.kind).or_default();
            f.sent += 1;
            let latency = o.done.saturating_sub(o.due);
            let sending = o.done.saturating_sub(o.sent);
            match o.fate {
                Fate::Answered(status) => {
                    by_kind.push(sending);
                    f.answered.push(latency);
                    f.answered_sending.push(sending);
                    *f.statuses.entry(status).or_default() += 1;
                }
                Fate::Shed(timing) => {
                    f.shed.push(latency);
                    f.before.push(o.sent.saturating_sub(o.due));
                    if let Some(host) = timing.host {
                        f.host.push(host);
                        f.wire.push(sending.saturating_sub(host));
                    }
                    f.head.extend(timing.head);
                    f.queue.extend(timing.queue);
                }
                Fate::Dropped => f.dropped += 1,
            }
        }
        for v in [
            &mut f.answered,
            &mut f.answered_sending,
            &mut f.shed,
            &mut f.before,
            &mut f.host,
            &mut f.head,
            &mut f.queue,
            &mut f.wire,
        ] {
            v.sort_unstable();
        }
        for v in f.kinds.values_mut() {
            v.sort_unstable();
        }
        f
    }

    /// The share of the sent that `n` is, in per cent.
    fn share(&self, n: usize) -> f64 {
        n as f64 * 100.0 / self.sent.max(1) as f64
    }

    /// The class's line of the table.
    fn note(&self) -> String {
        let mut note = format!(
            "sent {}; answered {:.1} %, p50/p99 {} (from sending {}",
            self.sent,
            self.share(self.answered.len()),
            p50_p99(&self.answered),
            p50_p99(&self.answered_sending),
        );
        if self.kinds.len() > 1 {
            for (kind, answered) in &self.kinds {
                let _ = write!(note, "; {kind} {}", p50_p99(answered));
            }
        }
        let _ = write!(
            note,
            ") {:?}; shed {:.1} %, p50/p99 {}",
            self.statuses,
            self.share(self.shed.len()),
            p50_p99(&self.shed),
        );
        if !self.shed.is_empty() {
            let _ = write!(
                note,
                " = before sending {} + host {} (of which head {}, queue {}) + the rest {}",
                p50_p99(&self.before),
                p50_p99(&self.host),
                p50_p99(&self.head),
                p50_p99(&self.queue),
                p50_p99(&self.wire),
            );
        }
        let _ = write!(note, "; dropped without a response {};", self.dropped);
        note
    }
}

/// `p50/p99 ms` of `sorted` (`12.3/45.6 ms`), or `-` for none.
fn p50_p99(sorted: &[Duration]) -> String {
    let ms = |p| percentile(sorted, p).map_or(0.0, |d: Duration| d.as_secs_f64() * 1e3);
    match sorted.is_empty() {
        true => "-".to_owned(),
        false => format!("{:.1}/{:.1} ms", ms(0.5), ms(0.99)),
    }
}

/// Critical requests shed, and how many of them at a moment a lower class's request that was
/// answered was in flight (due, not yet answered).
fn critical_shed(outcomes: &[Outcome]) -> (usize, usize) {
    let lower: Vec<(Duration, Duration)> = outcomes
        .iter()
        .filter(|o| o.class > Class::Critical && matches!(o.fate, Fate::Answered(_)))
        .map(|o| (o.due, o.done))
        .collect();
    let shed: Vec<Duration> = outcomes
        .iter()
        .filter(|o| o.class == Class::Critical && matches!(o.fate, Fate::Shed { .. }))
        .map(|o| o.done)
        .collect();
    let amid = shed
        .iter()
        .filter(|t| lower.iter().any(|(due, done)| due <= *t && *t <= done))
        .count();
    (shed.len(), amid)
}

/// A run's rows: what it sent, then one row per class that sent anything, most protected
/// first, then the critical requests shed.
fn report(mode: &Mode, rate: f64, size: usize, outcomes: &[Outcome]) -> Vec<Row> {
    let name = format!("spike, {}", mode.label());
    let last_sent = outcomes.iter().map(|o| o.sent).max().unwrap_or_default();
    let mut rows = vec![Row::noted(
        name.clone(),
        format!(
            "{rate:.0} arrivals/s ({OVERLOAD:.0}× the poll's sustained rate) due over {:.2} s (the last sent at {:.2} s), {READS_PER_BUY} polls to 1 buy; beside them {CRITICAL_RATE:.0}/s webhook deliveries and {CRITICAL_RATE:.0}/s drain jobs, a connection each; times from each request's due time;",
            size as f64 / rate,
            last_sent.as_secs_f64(),
        ),
    )];
    for class in Class::ALL {
        let figures = Figures::of(outcomes, class);
        if figures.sent == 0 {
            continue;
        }
        let kinds: Vec<&str> = figures.kinds.keys().copied().collect();
        rows.push(Row::noted(
            format!("{name}: {class} ({})", kinds.join(", ")),
            figures.note(),
        ));
    }
    let (shed, amid) = critical_shed(outcomes);
    rows.push(Row::noted(
        format!("{name}: critical shed"),
        format!("critical requests shed: {shed} (while lower classes were served: {amid})"),
    ));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An outcome due at `due_ms`, sent 2 ms later, done at `done_ms`.
    fn outcome(class: Class, due_ms: u64, done_ms: u64, fate: Fate) -> Outcome {
        Outcome {
            kind: "k",
            class,
            due: Duration::from_millis(due_ms),
            sent: Duration::from_millis(due_ms + 2),
            done: Duration::from_millis(done_ms),
            fate,
        }
    }

    fn shed(host_ms: u64, head_ms: u64, queue_ms: u64) -> Fate {
        Fate::Shed(ServerTiming {
            head: Some(Duration::from_millis(head_ms)),
            queue: Some(Duration::from_millis(queue_ms)),
            host: Some(Duration::from_millis(host_ms)),
            accept: None,
        })
    }

    #[test]
    fn figures_split_a_shed_answers_time() {
        let outcomes = [
            outcome(Class::Read, 0, 10, Fate::Answered(200)),
            outcome(Class::Read, 0, 20, shed(8, 1, 5)),
            outcome(Class::Read, 0, 30, Fate::Dropped),
            outcome(Class::Sale, 0, 5, Fate::Answered(202)),
        ];
        let f = Figures::of(&outcomes, Class::Read);
        assert_eq!(
            (f.sent, f.answered.len(), f.shed.len(), f.dropped),
            (3, 1, 1, 1)
        );
        assert_eq!(f.wire, [Duration::from_millis(10)]);
        assert_eq!(
            f.note(),
            "sent 3; answered 33.3 %, p50/p99 10.0/10.0 ms (from sending 8.0/8.0 ms) {200: 1}; shed 33.3 %, p50/p99 20.0/20.0 ms = before sending 2.0/2.0 ms + host 8.0/8.0 ms (of which head 1.0/1.0 ms, queue 5.0/5.0 ms) + the rest 10.0/10.0 ms; dropped without a response 1;"
        );
    }

    #[test]
    fn figures_give_each_kinds_answers_when_a_class_has_several() {
        let mut webhook = outcome(Class::Critical, 0, 12, Fate::Answered(200));
        webhook.kind = "webhook";
        let outcomes = [
            webhook,
            outcome(Class::Critical, 0, 52, Fate::Answered(200)),
        ];
        assert_eq!(
            Figures::of(&outcomes, Class::Critical).note(),
            "sent 2; answered 100.0 %, p50/p99 52.0/52.0 ms (from sending 50.0/50.0 ms; k 50.0/50.0 ms; webhook 10.0/10.0 ms) {200: 2}; shed 0.0 %, p50/p99 -; dropped without a response 0;"
        );
    }

    #[test]
    fn critical_shed_counts_those_amid_lower_classes_served() {
        let outcomes = [
            outcome(Class::Read, 0, 50, Fate::Answered(200)),
            outcome(Class::Critical, 10, 40, shed(5, 0, 5)),
            outcome(Class::Critical, 60, 70, shed(5, 0, 5)),
            outcome(Class::Critical, 60, 80, Fate::Answered(200)),
            outcome(Class::Sale, 65, 75, shed(5, 0, 5)),
        ];
        assert_eq!(critical_shed(&outcomes), (2, 1));
    }

    #[test]
    fn the_crowd_leaves_room_for_the_critical_trickle() {
        assert_eq!(crowd_size(1_000.0, 100_000), 3_000);
        let n = crowd_size(10_000.0, 15_000);
        assert!(
            n < 15_000 && n as f64 * (1.0 + 40.0 / 10_000.0) <= 15_000.0,
            "{n}"
        );
        assert_eq!(buys_in(4_001), 1_000);
    }
}
