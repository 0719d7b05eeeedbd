//! The running sandbox's shared state: its objects under one lock, its clock, keys and HTTP
//! client, and the webhook deliveries it runs in the background (one task per delivery, as
//! [`super::webhooks`] describes them).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::AbortHandle;

use super::config::{ApiKey, RetryPolicy};
use super::ids::{Clock, wall_s};
use super::state::State;
use super::webhooks::{Attempt, DeliveryState, RESPONSE_SHOWN};

pub(crate) struct Inner {
    pub state: Mutex<State>,
    pub clock: Clock,
    pub base_url: String,
    pub keys: Vec<ApiKey>,
    pub api_version: String,
    pub retry: RetryPolicy,
    pub http: reqwest::Client,
    pub runtime: tokio::runtime::Handle,
    pub tasks: Mutex<Vec<AbortHandle>>,
}

impl Inner {
    /// Runs `f` on the state brought up to now (sessions expired, events due), then starts the
    /// deliveries it queued.
    pub fn with_state<T>(self: &Arc<Self>, f: impl FnOnce(&mut State, i64) -> T) -> T {
        let now = self.clock.now();
        let out = {
            let mut state = self.state.lock().expect("sandbox state");
            state.tick(now, &self.base_url);
            f(&mut state, now)
        };
        self.flush();
        out
    }

    /// Keeps a task to abort when the sandbox goes.
    pub fn track(&self, task: AbortHandle) {
        let mut tasks = self.tasks.lock().expect("sandbox tasks");
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// Starts the deliveries queued under the lock (unless a task has one already).
    pub fn flush(self: &Arc<Self>) {
        let queued: Vec<usize> = {
            let mut state = self.state.lock().expect("sandbox state");
            let queued = std::mem::take(&mut state.to_spawn);
            queued
                .into_iter()
                .filter(|&d| !std::mem::replace(&mut state.deliveries[d].running, true))
                .collect()
        };
        for d in queued {
            let task = self.runtime.spawn(deliver(self.clone(), d));
            self.track(task.abort_handle());
        }
    }
}

/// Delivers delivery `d` until a 2xx, the attempts run out, or it is held back.
pub(crate) async fn deliver(inner: Arc<Inner>, d: usize) {
    loop {
        attempts(&inner, d).await;
        let mut state = inner.state.lock().expect("sandbox state");
        let delivery = &mut state.deliveries[d];
        // Held back and released again before this task noticed: go on delivering.
        if delivery.state != DeliveryState::Pending {
            delivery.running = false;
            return;
        }
    }
}

async fn attempts(inner: &Inner, d: usize) {
    let policy = inner.retry;
    let mut backoff = policy.first_backoff;
    loop {
        let (url, secrets, body) = {
            let state = inner.state.lock().expect("sandbox state");
            let delivery = &state.deliveries[d];
            if delivery.state != DeliveryState::Pending {
                return;
            }
            let endpoint = &state.endpoints[delivery.endpoint];
            let event = &state.events.rows[delivery.event];
            (
                endpoint.url.clone(),
                endpoint.secrets.clone(),
                state.event_json(event).to_string(),
            )
        };
        let t = wall_s();
        let header = crate::provider::signature(&secrets, t.max(0) as u64, &body);
        let answer = inner
            .http
            .post(&url)
            .header("content-type", "application/json; charset=utf-8")
            .header("stripe-signature", header)
            .header(
                "user-agent",
                "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            )
            .body(body)
            .timeout(policy.timeout)
            .send()
            .await
            .ok();
        let status = answer.as_ref().map(|r| r.status().as_u16());
        let response = match answer {
            Some(r) => r.bytes().await.ok().map(|body| {
                String::from_utf8_lossy(&body[..body.len().min(RESPONSE_SHOWN)]).into_owned()
            }),
            None => None,
        };
        let ok = status.is_some_and(|s| (200..300).contains(&s));
        {
            let mut state = inner.state.lock().expect("sandbox state");
            let delivery = &mut state.deliveries[d];
            delivery.attempts.push(Attempt {
                status,
                response,
                at: t,
            });
            if ok {
                delivery.state = DeliveryState::Delivered;
                return;
            }
            if delivery.attempts.len() >= policy.attempts as usize {
                if delivery.state == DeliveryState::Pending {
                    delivery.state = DeliveryState::Exhausted;
                }
                return;
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}
