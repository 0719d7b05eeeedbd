//! How many requests below critical may hold an instance at once: an adaptive concurrency
//! limit under the pool's size, after Netflix's concurrency-limits (its `Gradient2Limit` backs
//! off by how much latency has grown, its `AIMDLimit` grows while the limit is what holds
//! requests back).
//!
//! The signal is a request's stretch: its time in the instance (instantiation, the guest, its
//! Redis and Postgres calls) over the least such time its class has shown lately
//! ([`LEAST_WINDOW`]). Outbound HTTP is left out: a pay waiting on the provider holds a slot
//! without holding a core, and its wait does not grow with how many run here. While a
//! [`WINDOW`]'s requests are stretched more than [`TOLERANCE`] on average, the limit shrinks in
//! proportion (at most by half a window); while they are not and the limit is what keeps
//! requests waiting, it grows by its square root. In a CPU-bound spike a pool of every slot
//! only shares the cores among more guests at once: each takes longer, and as many are served
//! and shed. The gate's queue control works on what the limit leaves waiting, so a standing
//! queue is still shed at once.

use std::time::Duration;

use tokio::time::Instant;

/// How long a window of samples lasts before the limit moves.
pub const WINDOW: Duration = Duration::from_millis(50);

/// How much longer than its class's least a request may take, on average over a window, before
/// the limit shrinks: at rest the average is already a few times the least, the best case.
pub const TOLERANCE: f64 = 8.0;

/// How long a class's least time stands: a baseline measured at rest is kept through a spike,
/// and one from another load (a cold start, a slower Redis) ages out.
pub const LEAST_WINDOW: Duration = Duration::from_secs(30);

/// The limit never goes below the ceiling over this: what stretches guests may be outside the
/// host (the load balancer's other tenants, Redis, a load generator on the same cores), and
/// admitting fewer cannot make that go away, only serve fewer.
pub const FLOOR_DIVISOR: u32 = 4;

/// Classes the limit applies to: every class below critical.
const CLASSES: usize = 3;

/// The limit and what it is measured on.
#[derive(Debug)]
pub struct Limit {
    value: u32,
    ceiling: u32,
    least: [Least; CLASSES],
    window: Window,
}

/// A class's least time in an instance: the least of this [`LEAST_WINDOW`] and the last.
#[derive(Debug, Clone, Copy)]
struct Least {
    now: Duration,
    before: Duration,
    since: Instant,
}

impl Least {
    /// Counts `took`, and gives the least now.
    fn see(&mut self, took: Duration, at: Instant) -> Duration {
        if at - self.since >= LEAST_WINDOW {
            (self.before, self.now, self.since) = (self.now, took, at);
        } else {
            self.now = self.now.min(took);
        }
        self.now.min(self.before)
    }
}

#[derive(Debug)]
struct Window {
    since: Instant,
    stretch: f64,
    samples: u32,
}

impl Limit {
    /// A limit of `ceiling` at first.
    pub fn new(ceiling: u32, now: Instant) -> Self {
        let least = Least {
            now: Duration::MAX,
            before: Duration::MAX,
            since: now,
        };
        Limit {
            value: ceiling,
            ceiling,
            least: [least; CLASSES],
            window: Window {
                since: now,
                stretch: 0.0,
                samples: 0,
            },
        }
    }

    /// How many may run at once now.
    pub fn get(&self) -> u32 {
        self.value
    }

    /// The fewest it lets run at once.
    fn floor(&self) -> u32 {
        (self.ceiling / FLOOR_DIVISOR).max(1)
    }

    /// A request of class `class` (1 to 3: below critical) spent `took` in its instance,
    /// outbound HTTP left out; `held_back` says whether the limit keeps requests waiting now.
    pub fn sample(&mut self, class: usize, took: Duration, held_back: bool, at: Instant) {
        let least = self.least[class - 1]
            .see(took, at)
            .max(Duration::from_micros(1));
        self.window.stretch += took.as_secs_f64() / least.as_secs_f64();
        self.window.samples += 1;
        if at - self.window.since < WINDOW {
            return;
        }
        let stretch = self.window.stretch / f64::from(self.window.samples);
        self.window = Window {
            since: at,
            stretch: 0.0,
            samples: 0,
        };
        let floor = self.floor();
        if stretch > TOLERANCE {
            let gradient = (TOLERANCE / stretch).max(0.5);
            self.value = ((f64::from(self.value) * gradient) as u32).max(floor);
        } else if held_back {
            let step = f64::from(self.value).sqrt().ceil() as u32;
            self.value = (self.value + step).min(self.ceiling);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// Feeds `n` windows of requests of the sale class that each took `took`.
    fn windows(limit: &mut Limit, start: &mut Instant, n: u32, took: Duration, held_back: bool) {
        for _ in 0..n {
            for _ in 0..10 {
                limit.sample(1, took, held_back, *start);
            }
            *start += WINDOW;
            limit.sample(1, took, held_back, *start);
        }
    }

    #[test]
    fn stretched_requests_shrink_it_to_the_floor_and_quick_ones_grow_it_back() {
        let mut now = Instant::now();
        let mut limit = Limit::new(124, now);
        windows(&mut limit, &mut now, 1, MS, true);
        assert_eq!(limit.get(), 124, "at the ceiling already");
        windows(&mut limit, &mut now, 1, MS * 80, true);
        assert_eq!(limit.get(), 62, "80 times the least: halved");
        windows(&mut limit, &mut now, 10, MS * 80, true);
        assert_eq!(limit.get(), 31, "a quarter of the ceiling at least");
        windows(&mut limit, &mut now, 1, MS * 2, true);
        assert_eq!(limit.get(), 37, "grown by its square root");
        windows(&mut limit, &mut now, 1, MS * 2, false);
        assert_eq!(limit.get(), 37, "not while nobody is held back");
        windows(&mut limit, &mut now, 1, MS * 10, true);
        assert_eq!(
            limit.get(),
            31,
            "ten times the least: shrunk by 8/10, to the floor"
        );
    }

    #[test]
    fn each_class_is_measured_against_its_own_least() {
        let mut now = Instant::now();
        let mut limit = Limit::new(64, now);
        // Reads take 1 ms, sales 10 ms, at rest: neither is stretched.
        for _ in 0..20 {
            limit.sample(3, MS, true, now);
            limit.sample(1, MS * 10, true, now);
            now += MS * 5;
        }
        assert_eq!(limit.get(), 64);
    }

    #[test]
    fn a_least_from_another_load_ages_out() {
        let mut now = Instant::now();
        let mut limit = Limit::new(64, now);
        limit.sample(1, Duration::from_micros(100), false, now);
        // Everything takes 2 ms from now on: 20 times the old least, while it stands.
        now += LEAST_WINDOW;
        limit.sample(1, MS * 2, false, now);
        let shrunk = limit.get();
        assert!(shrunk < 64);
        now += LEAST_WINDOW;
        windows(&mut limit, &mut now, 3, MS * 2, false);
        assert_eq!(
            limit.get(),
            shrunk,
            "2 ms is the least now: nothing is stretched"
        );
    }
}
