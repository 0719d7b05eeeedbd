//! Admission to the instance pool under overload: a slot per live instance, a queue per
//! request class ([`Class`]), and queue control that sheds at once what waiting would not help.
//!
//! A request that finds a slot free (and nobody of its class or above waiting) runs at once.
//! Otherwise it queues, and how long it may wait follows the queue's recent past, as the
//! controlled delay of "Fail at scale" (Maurer, ACM Queue 2015) does: while its class's queue
//! has been empty within the last [`QueueControl::interval`], a burst is forming and the request
//! may wait until the queue has stood that interval (at least the target); once the queue has
//! stood longer, the host is overloaded and a new request waits at most [`QueueControl::target`] before it is answered `503` with
//! `Retry-After` (never run, so safe to retry). While a queue stands it is served newest first
//! (adaptive LIFO, the same paper): the requests that are still fresh get the slots and the old
//! ones, about to be shed anyway, go first. A shed request is answered at its own deadline,
//! not after the requests ahead of it; and one that would not get a slot within its wait at
//! the rate slots are coming free ([`ServiceRate`]) is answered at once, so a burst larger than
//! the pool serves in an interval never waits a whole interval to be shed.
//!
//! How many requests below critical run at once is a limit of its own under the pool's size,
//! adaptive ([`super::limit`]): what it leaves waiting is what the queue control above works on.
//!
//! Classes: a freed slot goes to the most protected class waiting. The last
//! [`Gate::reserve`] slots are kept for critical requests, and a critical request is never shed
//! while a slot is held by a lower class (the next slot to come free is its own). When critical
//! requests alone fill the pool (a burst of the provider's webhooks), their queue is served
//! oldest first and a critical request waits on while slots come free fast enough to serve it
//! within [`CRITICAL_MAX_WAIT`]: a shed webhook comes back only at the provider's next retry,
//! minutes later, while its payment's order waits. Only a critical queue that does not move is
//! shed.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::limit::Limit;

/// A request's class, from most to least protected (the order of the variants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// What keeps the order chain moving: the provider's payment webhook, the scheduled jobs,
    /// operators' writes. Never shed while a lower class is served.
    Critical,
    /// A buyer buying: precheck, buy, pay; operators' reads.
    Sale,
    /// A buyer getting in: the admission challenge and token.
    Entry,
    /// Everything a buyer may simply ask again: polls, event pages, the time, assets.
    Read,
}

impl Class {
    /// Every class, most protected first.
    pub const ALL: [Class; 4] = [Class::Critical, Class::Sale, Class::Entry, Class::Read];

    /// The class of a route of an app that declares none.
    pub const UNDECLARED: Class = Class::Sale;

    /// Its position in [`Class::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in the manifest, the metrics and the reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Critical => "critical",
            Class::Sale => "sale",
            Class::Entry => "entry",
            Class::Read => "read",
        }
    }

    /// What a shed request of this class is told to wait at first, in seconds: a buyer's click
    /// comes back soonest, a page read or an admission later, so the sale gets the first room.
    pub fn retry_after_base_s(self) -> u64 {
        match self {
            Class::Critical | Class::Sale => 1,
            Class::Entry | Class::Read => 2,
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The queue control's two constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueControl {
    /// The longest a request may wait once its class's queue has stood for [`Self::interval`].
    pub target: Duration,
    /// How long a queue may stand before the host counts itself overloaded, and the longest a
    /// request waits while it has not (a burst, served).
    pub interval: Duration,
}

impl QueueControl {
    /// "Fail at scale"'s constants: 5 ms and 100 ms. A burst of a few times the pool waits a
    /// guest's time or two and is served; a standing queue answers within 5 ms what it sheds.
    pub const DEFAULT: QueueControl = QueueControl {
        target: Duration::from_millis(5),
        interval: Duration::from_millis(100),
    };

    /// A request waits up to `wait` whatever the queue's past (tests on a loaded machine).
    pub fn fixed(wait: Duration) -> Self {
        QueueControl {
            target: wait,
            interval: wait,
        }
    }
}

impl Default for QueueControl {
    fn default() -> Self {
        QueueControl::DEFAULT
    }
}

/// The most a shed request is told to wait, in seconds (the storefront's and the demo's own
/// back-off stops doubling there too: `web/common.js`, `backOffMs`).
pub const MAX_RETRY_AFTER_S: u64 = 8;

/// The longest a critical request waits while critical requests alone fill the pool and slots
/// keep coming free: well within a webhook sender's timeout, and the order chain's requests are
/// short.
pub const CRITICAL_MAX_WAIT: Duration = Duration::from_secs(1);

/// How long a queue must stand for each doubling of `Retry-After`.
const RETRY_AFTER_DOUBLING: Duration = Duration::from_secs(5);

/// A request the gate did not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// How long it waited in the queue.
    pub waited: Duration,
    /// `Retry-After`, in seconds: its class's base, doubled for every
    /// [`RETRY_AFTER_DOUBLING`] the queue has stood, at most [`MAX_RETRY_AFTER_S`]. Clients add
    /// up to as much again of jitter, so that a shed crowd comes back spread out.
    pub retry_after_s: u64,
}

/// What a queue is told when a slot is its.
type Grant = oneshot::Sender<()>;

/// One class's queue.
struct Queue {
    /// Oldest first; ids grow from front to back.
    waiting: VecDeque<(u64, Grant)>,
    /// When the queue was last seen empty because everybody in it was served. A queue emptied
    /// by shedding still stands: the overload it shed has not gone.
    last_empty: Instant,
    /// Whether it is empty now because its last requests were shed (or went away).
    emptied_by_shedding: bool,
}

impl Queue {
    /// Whether it has stood a whole `interval` at `now`.
    fn standing(&self, now: Instant, interval: Duration) -> bool {
        now - self.last_empty >= interval
    }

    /// Takes the waiter at `at` out without serving it.
    fn leave(&mut self, at: usize) {
        self.waiting.remove(at);
        self.emptied_by_shedding = self.waiting.is_empty();
    }
}

struct State {
    /// Slots held, by class.
    held: [u32; 4],
    /// How many slots requests below critical may hold at once.
    limit: Limit,
    queues: [Queue; 4],
    next_id: u64,
    /// How fast slots come free.
    rate: ServiceRate,
}

/// How many slots come free a second, measured over short windows and smoothed, so that the
/// gate can tell how long a newcomer would wait behind those already queued.
struct ServiceRate {
    /// Slots freed since `since`.
    freed: u32,
    since: Instant,
    /// The smoothed rate, per second (0: none measured yet).
    per_s: f64,
}

impl ServiceRate {
    /// A window: long enough to count a few releases at any load worth predicting.
    const WINDOW: Duration = Duration::from_millis(20);

    fn freed(&mut self, now: Instant) {
        self.freed += 1;
        let elapsed = now - self.since;
        if elapsed >= Self::WINDOW {
            let measured = f64::from(self.freed) / elapsed.as_secs_f64();
            self.per_s = if self.per_s == 0.0 {
                measured
            } else {
                (self.per_s + measured) / 2.0
            };
            (self.freed, self.since) = (0, now);
        }
    }

    /// The rate now, if there is a recent one: after a few windows without a release the
    /// smoothed figure no longer says anything.
    fn now(&self, now: Instant) -> Option<f64> {
        (self.per_s > 0.0 && now - self.since < Self::WINDOW * 5).then_some(self.per_s)
    }
}

impl State {
    fn in_use(&self) -> u32 {
        self.held.iter().sum()
    }

    /// Whether a slot of a class below critical is held.
    fn lower_class_served(&self) -> bool {
        self.lower_held() > 0
    }

    /// Slots held by classes below critical.
    fn lower_held(&self) -> u32 {
        self.held[1..].iter().sum()
    }
}

/// The instance slots and their queues.
pub struct Gate {
    capacity: u32,
    reserve: u32,
    control: QueueControl,
    /// Beyond this many waiting, a class's new requests are shed at once.
    max_waiting: usize,
    state: Mutex<State>,
    idle: Notify,
}

impl Gate {
    /// `capacity` slots, a few of which only critical requests take.
    pub fn new(capacity: u32, control: QueueControl) -> Arc<Gate> {
        let now = Instant::now();
        let queue = || Queue {
            waiting: VecDeque::new(),
            last_empty: now,
            emptied_by_shedding: false,
        };
        Arc::new(Gate {
            capacity,
            reserve: Gate::reserve_of(capacity),
            control,
            max_waiting: (capacity as usize * 16).max(1024),
            state: Mutex::new(State {
                held: [0; 4],
                limit: Limit::new(capacity - Gate::reserve_of(capacity), now),
                queues: [queue(), queue(), queue(), queue()],
                next_id: 0,
                rate: ServiceRate {
                    freed: 0,
                    since: now,
                    per_s: 0.0,
                },
            }),
            idle: Notify::new(),
        })
    }

    /// Slots kept for critical requests: 1 in 32, at least one (and one fewer than the pool,
    /// so that a pool of one still serves everybody).
    fn reserve_of(capacity: u32) -> u32 {
        (capacity / 32).max(1).min(capacity.saturating_sub(1))
    }

    /// Slots in all.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Slots only a critical request may take.
    pub fn reserve(&self) -> u32 {
        self.reserve
    }

    /// Slots held now.
    pub fn in_use(&self) -> u32 {
        self.lock().in_use()
    }

    /// Requests waiting now, by class ([`Class::ALL`]'s order).
    pub fn waiting(&self) -> [usize; 4] {
        let state = self.lock();
        std::array::from_fn(|i| state.queues[i].waiting.len())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many slots requests below critical may hold now (and never the [`Self::reserve`]):
    /// fewer while they take longer than they do at rest.
    pub fn admitting(&self) -> u32 {
        self.lock().limit.get()
    }

    fn may_take(&self, state: &State, class: Class) -> bool {
        let in_use = state.in_use();
        match class {
            Class::Critical => in_use < self.capacity,
            _ => in_use < self.capacity - self.reserve && state.lower_held() < state.limit.get(),
        }
    }

    /// A slot for a request of `class`, at once or after a wait the queue control allows;
    /// refused when waiting would not help. Dropping the future gives up its place (or the slot
    /// it was just given).
    pub async fn admit(self: &Arc<Self>, class: Class) -> Result<Permit, Refused> {
        let arrived = Instant::now();
        let i = class.index();
        let (id, rx, mut deadline) = {
            let mut state = self.lock();
            let nobody_ahead = state.queues[..=i].iter().all(|q| q.waiting.is_empty());
            if nobody_ahead && self.may_take(&state, class) {
                state.held[i] += 1;
                state.queues[i].last_empty = arrived;
                state.queues[i].emptied_by_shedding = false;
                return Ok(self.permit(class, Duration::ZERO));
            }
            let id = state.next_id;
            state.next_id += 1;
            // Those served before it: every request of its class or a more protected one.
            let ahead: usize = state.queues[..=i].iter().map(|q| q.waiting.len()).sum();
            let rate = state.rate.now(arrived);
            let queue = &mut state.queues[i];
            if queue.waiting.is_empty() && !queue.emptied_by_shedding {
                queue.last_empty = arrived;
            }
            let standing = queue.standing(arrived, self.control.interval);
            // While the queue is served oldest first, a newcomer waits for everybody ahead.
            let hopeless = !standing
                && class != Class::Critical
                && rate.is_some_and(|per_s| {
                    (ahead + 1) as f64 / per_s > self.control.interval.as_secs_f64()
                });
            if queue.waiting.len() >= self.max_waiting || hopeless {
                return Err(self.refusal(class, arrived - queue.last_empty, Duration::ZERO));
            }
            let (tx, rx) = oneshot::channel();
            queue.waiting.push_back((id, tx));
            // Still queued when the queue has stood an interval, it has waited its target.
            let deadline = if standing {
                arrived + self.control.target
            } else {
                (queue.last_empty + self.control.interval).max(arrived + self.control.target)
            };
            (id, rx, deadline)
        };
        let mut ticket = Ticket {
            gate: self,
            class,
            id,
            rx,
            settled: false,
        };
        loop {
            if tokio::time::timeout_at(deadline, &mut ticket.rx)
                .await
                .is_ok()
            {
                ticket.settled = true;
                return Ok(self.permit(class, arrived.elapsed()));
            }
            let mut state = self.lock();
            let lower_class_served = state.lower_class_served();
            let now = Instant::now();
            let rate = state.rate.now(now);
            let queue = &mut state.queues[i];
            let Ok(at) = queue.waiting.binary_search_by_key(&id, |(id, _)| *id) else {
                // Given a slot as its wait ran out.
                drop(state);
                ticket.settled = true;
                return Ok(self.permit(class, arrived.elapsed()));
            };
            // Critical requests are served oldest first: `at` are ahead of it.
            let served_in_time = || {
                rate.is_some_and(|per_s| {
                    (now - arrived).as_secs_f64() + (at + 1) as f64 / per_s
                        <= CRITICAL_MAX_WAIT.as_secs_f64()
                })
            };
            if class == Class::Critical && lower_class_served {
                deadline += self.control.interval;
                continue;
            }
            if class == Class::Critical && served_in_time() {
                deadline = (deadline + self.control.interval)
                    .min(arrived + CRITICAL_MAX_WAIT)
                    .max(now + self.control.target);
                continue;
            }
            let stood = Instant::now() - queue.last_empty;
            queue.leave(at);
            ticket.settled = true;
            return Err(self.refusal(class, stood, arrived.elapsed()));
        }
    }

    fn permit(self: &Arc<Self>, class: Class, waited: Duration) -> Permit {
        Permit {
            gate: self.clone(),
            class,
            waited,
            took: None,
        }
    }

    fn refusal(&self, class: Class, stood: Duration, waited: Duration) -> Refused {
        let doublings = (stood.as_millis() / RETRY_AFTER_DOUBLING.as_millis()).min(8) as u32;
        Refused {
            waited,
            retry_after_s: (class.retry_after_base_s() << doublings).min(MAX_RETRY_AFTER_S),
        }
    }

    /// A request of `class` below critical spent `took` in its instance (outbound HTTP left
    /// out): the limit follows. Its slot is released next, which serves any the limit now lets in.
    fn served(&self, state: &mut State, class: Class, took: Duration) {
        let held_back = state.lower_held() >= state.limit.get()
            || state.queues[1..].iter().any(|q| !q.waiting.is_empty());
        state
            .limit
            .sample(class.index(), took, held_back, Instant::now());
    }

    /// A slot of `class` comes free: it goes to the most protected class waiting.
    fn release(&self, state: &mut State, class: Class) {
        state.held[class.index()] -= 1;
        let now = Instant::now();
        state.rate.freed(now);
        self.serve(state, now);
        if state.in_use() == 0 {
            self.idle.notify_waiters();
        }
    }

    /// Gives the slots that may be taken to those waiting, the most protected class first.
    fn serve(&self, state: &mut State, now: Instant) {
        for class in Class::ALL {
            while self.may_take(state, class) {
                let queue = &mut state.queues[class.index()];
                // A standing queue is served newest first, but the critical one, which is
                // not shed while it moves.
                let next = if class != Class::Critical && queue.standing(now, self.control.interval)
                {
                    queue.waiting.pop_back()
                } else {
                    queue.waiting.pop_front()
                };
                let Some((_, grant)) = next else { break };
                if queue.waiting.is_empty() {
                    queue.last_empty = now;
                    queue.emptied_by_shedding = false;
                }
                if grant.send(()).is_ok() {
                    state.held[class.index()] += 1;
                }
            }
        }
    }

    /// Waits until no slot is held.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_use() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// A place in a queue: dropped before it is settled (the request went away), it leaves the
/// queue, or gives back the slot it was given meanwhile.
struct Ticket<'a> {
    gate: &'a Arc<Gate>,
    class: Class,
    id: u64,
    rx: oneshot::Receiver<()>,
    settled: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut state = self.gate.lock();
        let queue = &mut state.queues[self.class.index()];
        match queue.waiting.binary_search_by_key(&self.id, |(id, _)| *id) {
            Ok(at) => queue.leave(at),
            Err(_) => {
                if self.rx.try_recv().is_ok() {
                    self.gate.release(&mut state, self.class);
                }
            }
        }
    }
}

/// A held slot, given back when dropped.
pub struct Permit {
    gate: Arc<Gate>,
    class: Class,
    waited: Duration,
    /// How long its request spent in the instance, once known ([`Permit::served`]).
    took: Option<Duration>,
}

impl Permit {
    /// How long the request waited for it.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Gives the slot back after a request that spent `took` in its instance, outbound HTTP
    /// left out, for the adaptive limit to follow ([`super::limit`]).
    pub fn served(mut self, took: Duration) {
        self.took = Some(took);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        if let Some(took) = self.took
            && self.class != Class::Critical
        {
            self.gate.served(&mut state, self.class, took);
        }
        self.gate.release(&mut state, self.class);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTROL: QueueControl = QueueControl::DEFAULT;

    /// Starts `admit` for `class` on a task of its own; `paused` time makes every wait exact.
    fn request(gate: &Arc<Gate>, class: Class) -> tokio::task::JoinHandle<Result<Permit, Refused>> {
        let gate = gate.clone();
        tokio::spawn(async move { gate.admit(class).await })
    }

    /// Lets every task run until it waits on the clock.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    async fn fill(gate: &Arc<Gate>, class: Class, n: u32) -> Vec<Permit> {
        let mut held = Vec::new();
        for _ in 0..n {
            held.push(gate.admit(class).await.expect("a free slot"));
        }
        held
    }

    #[tokio::test(start_paused = true)]
    async fn a_free_slot_is_taken_at_once() {
        let gate = Gate::new(4, CONTROL);
        let permit = gate.admit(Class::Read).await.unwrap();
        assert_eq!(permit.waited(), Duration::ZERO);
        assert_eq!(gate.in_use(), 1);
        drop(permit);
        assert_eq!(gate.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_burst_is_queued_and_served() {
        let gate = Gate::new(4, CONTROL);
        let held = fill(&gate, Class::Sale, 3).await;
        let burst: Vec<_> = (0..3).map(|_| request(&gate, Class::Sale)).collect();
        settle().await;
        assert_eq!(gate.waiting()[Class::Sale.index()], 3);
        // The guests ahead finish within the interval: every queued request gets a slot.
        tokio::time::advance(Duration::from_millis(30)).await;
        drop(held);
        for r in burst {
            let permit = r.await.unwrap().expect("served, not shed");
            assert_eq!(permit.waited(), Duration::from_millis(30));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_standing_queue_is_shed_within_the_target() {
        let gate = Gate::new(4, CONTROL);
        let held = fill(&gate, Class::Sale, 3).await;
        // The first in line waits the whole interval and is shed: the queue has stood.
        let first = request(&gate, Class::Sale);
        settle().await;
        tokio::time::advance(CONTROL.interval).await;
        let shed = first.await.unwrap().err().expect("shed after the interval");
        assert_eq!(shed.waited, CONTROL.interval);
        // The queue stands (never empty for an interval): a newcomer waits the target alone.
        let second = request(&gate, Class::Sale);
        let third = request(&gate, Class::Sale);
        settle().await;
        tokio::time::advance(CONTROL.target).await;
        for r in [second, third] {
            let shed = r.await.unwrap().err().expect("shed at the target");
            assert_eq!(shed.waited, CONTROL.target);
        }
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_joiner_of_a_burst_waits_until_the_queue_has_stood_not_a_whole_interval() {
        let gate = Gate::new(4, CONTROL);
        let held = fill(&gate, Class::Sale, 3).await;
        let first = request(&gate, Class::Sale);
        settle().await;
        tokio::time::advance(CONTROL.interval - CONTROL.target * 4).await;
        let late = request(&gate, Class::Sale);
        settle().await;
        tokio::time::advance(CONTROL.target * 4).await;
        assert_eq!(first.await.unwrap().err().unwrap().waited, CONTROL.interval);
        // Joined 20 ms before the queue had stood its interval: shed then, not 100 ms later.
        let shed = late
            .await
            .unwrap()
            .err()
            .expect("shed when the queue has stood");
        assert_eq!(shed.waited, CONTROL.target * 4);
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn a_shed_request_is_answered_before_those_ahead_finish() {
        let gate = Gate::new(2, CONTROL);
        let held = fill(&gate, Class::Read, 1).await;
        let ahead = request(&gate, Class::Read);
        settle().await;
        tokio::time::advance(CONTROL.interval * 2).await;
        // The queue has stood for two intervals: ahead was shed at its interval; a newcomer is
        // shed at its target while the slot is still held (the guest takes seconds).
        assert!(ahead.await.unwrap().is_err());
        let newcomer = request(&gate, Class::Read);
        let shed_at = Instant::now();
        settle().await;
        tokio::time::advance(CONTROL.target).await;
        assert!(newcomer.await.unwrap().is_err());
        assert_eq!(shed_at.elapsed(), CONTROL.target);
        assert_eq!(gate.in_use(), 1, "the request ahead still runs");
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_beyond_what_comes_free_within_the_interval_is_shed_at_once() {
        let gate = Gate::new(4, CONTROL);
        let mut held = fill(&gate, Class::Sale, 3).await;
        // A slot comes free every 10 ms (100 a second), each taken again at once.
        for _ in 0..10 {
            tokio::time::advance(Duration::from_millis(10)).await;
            held.pop();
            held.push(gate.admit(Class::Sale).await.expect("a free slot"));
        }
        // 100 a second serve 10 within the 100 ms interval: a burst of 30 keeps 10 in line
        // and sheds the other 20 without a wait.
        let burst: Vec<_> = (0..30).map(|_| request(&gate, Class::Sale)).collect();
        settle().await;
        assert_eq!(gate.waiting()[Class::Sale.index()], 10);
        let mut shed_at_once = 0;
        for r in burst {
            if r.is_finished() {
                let refused = r.await.unwrap().err().expect("shed, not served");
                assert_eq!(refused.waited, Duration::ZERO);
                shed_at_once += 1;
            }
        }
        assert_eq!(shed_at_once, 20);
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn a_freed_slot_goes_to_a_buy_before_a_poll() {
        let gate = Gate::new(4, CONTROL);
        let mut held = fill(&gate, Class::Read, 3).await;
        let poll = request(&gate, Class::Read);
        settle().await;
        let buy = request(&gate, Class::Sale);
        settle().await;
        held.pop();
        settle().await;
        assert!(buy.is_finished(), "the buy, which came later, got the slot");
        assert!(!poll.is_finished());
        drop(held);
        assert!(poll.await.unwrap().is_ok());
        assert!(buy.await.unwrap().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn critical_requests_pass_a_pool_full_of_reads() {
        let gate = Gate::new(32, CONTROL);
        assert_eq!(gate.reserve(), 1);
        // Reads take every slot they may: the reserve stays free.
        let held = fill(&gate, Class::Read, 31).await;
        let read = request(&gate, Class::Read);
        settle().await;
        assert!(!read.is_finished(), "a read waits for the reserve");
        let webhook = gate.admit(Class::Critical).await.expect("the reserve");
        assert_eq!(webhook.waited(), Duration::ZERO);
        // The pool is full now: a second critical request waits, past its deadline, for the
        // first slot a read gives back, and is never shed while reads are served.
        let job = request(&gate, Class::Critical);
        settle().await;
        tokio::time::advance(CONTROL.interval * 20).await;
        assert!(!job.is_finished(), "waiting, not shed");
        assert!(read.await.unwrap().is_err(), "the read was shed meanwhile");
        let mut held = held;
        held.pop();
        let job = job.await.unwrap().expect("served");
        assert_eq!(job.waited(), CONTROL.interval * 20);
        drop((held, webhook, job));
        assert_eq!(gate.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_that_take_longer_than_at_rest_admit_fewer() {
        use crate::runtime::limit::WINDOW;
        let gate = Gate::new(64, QueueControl::fixed(Duration::from_secs(60)));
        assert_eq!(gate.admitting(), 62, "all but the reserve at first");
        let ms = Duration::from_millis(1);
        // At rest a sale takes 1 ms; in the spike 100.
        gate.admit(Class::Sale).await.unwrap().served(ms);
        for _ in 0..20 {
            tokio::time::advance(WINDOW).await;
            gate.admit(Class::Sale).await.unwrap().served(ms * 100);
        }
        let floor = 62 / 4;
        assert_eq!(gate.admitting(), floor);
        let mut held = fill(&gate, Class::Sale, floor).await;
        let sale = request(&gate, Class::Sale);
        settle().await;
        assert!(!sale.is_finished(), "held back by the limit");
        let webhook = gate.admit(Class::Critical).await.expect("above the limit");
        assert_eq!(webhook.waited(), Duration::ZERO);
        // Quick again: the limit grows by its square root, and more run at once.
        tokio::time::advance(WINDOW).await;
        held.pop().unwrap().served(ms);
        assert_eq!(gate.admitting(), floor + 4);
        held.push(sale.await.unwrap().expect("let in"));
        held.extend(fill(&gate, Class::Sale, 4).await);
        let sale = request(&gate, Class::Sale);
        settle().await;
        assert!(!sale.is_finished(), "held back by the grown limit");
        drop((held, webhook));
        sale.await.unwrap().expect("served");
        assert_eq!(gate.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn critical_requests_alone_are_shed_by_their_own_queue() {
        let gate = Gate::new(2, CONTROL);
        let held = fill(&gate, Class::Critical, 2).await;
        let job = request(&gate, Class::Critical);
        settle().await;
        tokio::time::advance(CONTROL.interval).await;
        assert!(job.await.unwrap().is_err());
        drop(held);
    }

    #[tokio::test(start_paused = true)]
    async fn a_standing_queue_is_served_newest_first() {
        let gate = Gate::new(2, QueueControl::fixed(Duration::from_secs(60)));
        let held = fill(&gate, Class::Sale, 1).await;
        let old = request(&gate, Class::Sale);
        settle().await;
        tokio::time::advance(Duration::from_secs(1)).await;
        let new = request(&gate, Class::Sale);
        settle().await;
        // Under a fixed wait of a minute the queue has not stood yet after 1 s: oldest first.
        drop(held);
        settle().await;
        assert!(old.is_finished() && !new.is_finished());
        drop(old.await.unwrap());
        assert!(new.await.unwrap().is_ok());

        // The critical queue is served oldest first, standing or not: it is not shed while it
        // moves, so its order of arrival is kept.
        let gate = Gate::new(3, CONTROL);
        let mut sales = fill(&gate, Class::Sale, 2).await;
        let critical = fill(&gate, Class::Critical, 1).await;
        let old = request(&gate, Class::Critical);
        settle().await;
        tokio::time::advance(CONTROL.interval * 2).await;
        let new = request(&gate, Class::Critical);
        settle().await;
        sales.pop();
        settle().await;
        assert!(old.is_finished() && !new.is_finished(), "oldest first");
        sales.pop();
        assert!(new.await.unwrap().is_ok());
        drop((critical, old.await.unwrap()));
    }

    /// A burst of critical requests five times the pool, each holding its slot 30 ms: their
    /// queue stands past its interval, yet moves, and every one is served.
    #[tokio::test(start_paused = true)]
    async fn critical_requests_alone_are_not_shed_while_their_queue_moves() {
        let gate = Gate::new(2, CONTROL);
        let burst: Vec<_> = (0..10)
            .map(|_| {
                let gate = gate.clone();
                tokio::spawn(async move {
                    let permit = gate.admit(Class::Critical).await?;
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    Ok::<Duration, Refused>(permit.waited())
                })
            })
            .collect();
        let mut longest = Duration::ZERO;
        for request in burst {
            longest = longest.max(request.await.unwrap().expect("served, not shed"));
        }
        assert!(longest > CONTROL.interval, "the queue stood: {longest:?}");
        assert!(longest < CRITICAL_MAX_WAIT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_goes_away_leaves_no_slot_behind() {
        let gate = Gate::new(2, CONTROL);
        let held = fill(&gate, Class::Read, 1).await;
        let gone = request(&gate, Class::Read);
        settle().await;
        gone.abort();
        settle().await;
        assert_eq!(gate.waiting()[Class::Read.index()], 0);
        drop(held);
        assert_eq!(gate.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_grows_with_the_class_and_how_long_the_queue_stood() {
        let gate = Gate::new(4, CONTROL);
        let at = |class, s| gate.refusal(class, Duration::from_secs(s), Duration::ZERO);
        assert_eq!(at(Class::Sale, 0).retry_after_s, 1);
        assert_eq!(at(Class::Read, 0).retry_after_s, 2);
        assert_eq!(at(Class::Sale, 5).retry_after_s, 2);
        assert_eq!(at(Class::Sale, 12).retry_after_s, 4);
        assert_eq!(at(Class::Read, 600).retry_after_s, MAX_RETRY_AFTER_S);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_waits_for_the_last_slot() {
        let gate = Gate::new(2, CONTROL);
        let permit = gate.admit(Class::Sale).await.unwrap();
        let idle = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.idle().await })
        };
        settle().await;
        assert!(!idle.is_finished());
        drop(permit);
        idle.await.unwrap();
    }
}
