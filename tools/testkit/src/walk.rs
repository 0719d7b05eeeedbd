//! A buyer's walk through the sale, as the storefront makes it: the admission challenge
//! (solved), admission, precheck, buy, poll, and pay where the caller pays. This is the one
//! home of what each step sends and how its answer is read. How a request travels is the
//! caller's ([`Client`]): the tests' [`TestApp`](crate::TestApp), the demo's recording client;
//! the bench's load generator sends the same [`Request`]s in phases of its own.

use std::future::Future;

use anyhow::Result;
use reqwest::Method;
use serde_json::{Value, json};

use crate::auth::jwt_for;
use crate::provider::Provider;

/// The steps of the walk, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    Challenge,
    Admission,
    Precheck,
    Buy,
    Poll,
    Pay,
}

impl Step {
    /// The step's name, as reports and measurements label it.
    pub fn name(self) -> &'static str {
        match self {
            Step::Challenge => "challenge",
            Step::Admission => "admission",
            Step::Precheck => "precheck",
            Step::Buy => "buy",
            Step::Poll => "poll",
            Step::Pay => "pay",
        }
    }
}

/// One request of the walk.
#[derive(Clone, Debug)]
pub struct Request {
    pub step: Step,
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// The buyer's shop JWT (`Authorization: Bearer …`).
    pub bearer: String,
    /// The JSON body, if any.
    pub body: Option<Value>,
}

/// An answer, as the storefront reads it.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    /// The JSON body (a JSON string of its text when it is not JSON).
    pub body: Value,
    /// `Retry-After` in seconds, if the server gave one.
    pub retry_after_s: Option<u64>,
}

impl Reply {
    /// Whether the answer says "come back later" (`503`, `429`), as the storefront retries it.
    pub fn says_later(&self) -> bool {
        matches!(self.status, 503 | 429)
    }

    /// An admission's token.
    pub fn admission_token(self) -> Answer<String> {
        self.field(200, "admission_token")
    }

    /// A precheck's purchase token.
    pub fn purchase_token(self) -> Answer<String> {
        self.field(200, "purchase_token")
    }

    /// An accepted buy's order id.
    pub fn order_id(self) -> Answer<String> {
        self.field(202, "order_id")
    }

    /// The string `field` of a `status` answer, or the answer itself as the refusal.
    fn field(self, status: u16, field: &str) -> Answer<String> {
        match self.body[field].as_str() {
            Some(value) if self.status == status => Ok(value.to_owned()),
            _ => Err(self),
        }
    }
}

impl From<Reply> for (u16, Value) {
    fn from(reply: Reply) -> Self {
        (reply.status, reply.body)
    }
}

/// What a step came to: its product, or the answer that refused it.
pub type Answer<T> = std::result::Result<T, Reply>;

/// How the walk's requests travel.
pub trait Client {
    /// Sends `request`; an error is a request that got no answer.
    fn send(&self, request: Request) -> impl Future<Output = Result<Reply>> + Send;
}

/// A buyer of one event: who they are and where their requests go.
#[derive(Clone, Debug)]
pub struct Buyer {
    pub event: String,
    pub user: String,
    pub jwt: String,
    /// The event's shard count, sent as `?shards=` as the storefront does (each request goes
    /// straight home); `None` sends no hint.
    shards: Option<u32>,
}

/// A whole walk: the order, or the step that refused it and its answer.
pub type Walked = Answer<String>;

impl Buyer {
    /// `user` (with a test JWT) buying at `event`, hinting `shards` if given.
    pub fn new(event: &str, user: &str, shards: Option<u32>) -> Self {
        Buyer {
            event: event.to_owned(),
            user: user.to_owned(),
            jwt: jwt_for(user),
            shards,
        }
    }

    /// A request of `step` to the event's `route`.
    fn request(&self, step: Step, method: Method, route: &str, body: Option<Value>) -> Request {
        let path = match self.shards {
            Some(n) => format!("/api/events/{}/{route}?shards={n}", self.event),
            None => format!("/api/events/{}/{route}", self.event),
        };
        Request {
            step,
            method,
            path,
            bearer: self.jwt.clone(),
            body,
        }
    }

    /// Asks for a proof-of-work challenge.
    pub fn challenge_request(&self) -> Request {
        self.request(Step::Challenge, Method::POST, "admission/challenge", None)
    }

    /// Asks for admission with a solved challenge (`challenge`, `nonce`).
    pub fn admission_request(&self, solution: Value) -> Request {
        self.request(Step::Admission, Method::POST, "admission", Some(solution))
    }

    /// Asks for admission without a proof of work, which only an event of difficulty 0
    /// admits: the benchmarks' load measures the sale's path, not the gate.
    pub fn unsolved_admission_request(&self) -> Request {
        self.request(Step::Admission, Method::POST, "admission", None)
    }

    /// Prechecks with an admission token.
    pub fn precheck_request(&self, admission_token: &str) -> Request {
        let body = json!({ "admission_token": admission_token });
        self.request(Step::Precheck, Method::POST, "precheck", Some(body))
    }

    /// Buys with a purchase token.
    pub fn buy_request(&self, purchase_token: &str) -> Request {
        let body = json!({ "purchase_token": purchase_token });
        self.request(Step::Buy, Method::POST, "buy", Some(body))
    }

    /// Polls for the buyer's order.
    pub fn poll_request(&self) -> Request {
        self.request(Step::Poll, Method::GET, "orders/me", None)
    }

    /// Starts paying `order` (the pay route takes no shard hint: the order names its shard).
    pub fn pay_request(&self, order: &str) -> Request {
        let mut request = self.request(Step::Pay, Method::POST, "", None);
        request.path = format!("/api/events/{}/orders/{order}/pay", self.event);
        request
    }

    /// A challenge, solved as a client solves it: the admission route's body.
    pub async fn solved_challenge(&self, client: &impl Client) -> Result<Answer<Value>> {
        let reply = client.send(self.challenge_request()).await?;
        if reply.status != 200 {
            return Ok(Err(reply));
        }
        let challenge = reply.body["challenge"].as_str().unwrap_or_default();
        let difficulty = reply.body["difficulty"].as_u64().unwrap_or(0) as u32;
        let nonce = crate::pow::solve(challenge, difficulty);
        Ok(Ok(json!({ "challenge": challenge, "nonce": nonce })))
    }

    /// Admission as the storefront asks it: a challenge, solved, then the admission route.
    /// The admission route's answer, or the challenge's refusal.
    pub async fn admission_reply(&self, client: &impl Client) -> Result<Reply> {
        match self.solved_challenge(client).await? {
            Ok(solution) => client.send(self.admission_request(solution)).await,
            Err(refused) => Ok(refused),
        }
    }

    /// [`Self::admission_reply`]: the admission token, or the refusal.
    pub async fn admission(&self, client: &impl Client) -> Result<Answer<String>> {
        Ok(self.admission_reply(client).await?.admission_token())
    }

    /// The purchase token for `admission_token`, or the refusal.
    pub async fn precheck(
        &self,
        client: &impl Client,
        admission_token: &str,
    ) -> Result<Answer<String>> {
        let reply = client.send(self.precheck_request(admission_token)).await?;
        Ok(reply.purchase_token())
    }

    /// The accepted order's id, or the refusal.
    pub async fn buy(&self, client: &impl Client, purchase_token: &str) -> Result<Answer<String>> {
        let reply = client.send(self.buy_request(purchase_token)).await?;
        Ok(reply.order_id())
    }

    /// The poll's answer.
    pub async fn poll(&self, client: &impl Client) -> Result<Reply> {
        client.send(self.poll_request()).await
    }

    /// The payment the pay route started for `order` (`status` `pending`, or `succeeded` when
    /// it was paid before), or the refusal.
    pub async fn start_payment(&self, client: &impl Client, order: &str) -> Result<Answer<Value>> {
        let reply = client.send(self.pay_request(order)).await?;
        match reply.status {
            200 => Ok(Ok(reply.body)),
            _ => Ok(Err(reply)),
        }
    }

    /// Pays `order` as a buyer does: the pay route starts the payment, `provider` charges it
    /// and confirms it by webhook. The pay route's refusal, or the webhook's answer
    /// (`outcome`); a payment that was no longer pending, as the pay route gave it.
    pub async fn pay(
        &self,
        client: &impl Client,
        provider: &Provider,
        order: &str,
    ) -> Result<Reply> {
        let payment = match self.start_payment(client, order).await? {
            Ok(payment) if payment["status"] == "pending" => payment,
            Ok(payment) => {
                return Ok(Reply {
                    status: 200,
                    body: payment,
                    retry_after_s: None,
                });
            }
            Err(refused) => return Ok(refused),
        };
        let delivered = provider.pay(&payment).await?;
        Ok(Reply {
            status: delivered.status,
            body: delivered.body,
            retry_after_s: None,
        })
    }

    /// Admission, then precheck: the purchase token, or the refusal.
    pub async fn admit_and_precheck(&self, client: &impl Client) -> Result<Answer<String>> {
        match self.admission(client).await? {
            Ok(admission_token) => self.precheck(client, &admission_token).await,
            Err(refused) => Ok(Err(refused)),
        }
    }

    /// The whole walk, each step once: admission, precheck, buy, then a poll. The order, or
    /// the refusal that ended the walk.
    pub async fn walk(&self, client: &impl Client) -> Result<Walked> {
        let purchase_token = match self.admit_and_precheck(client).await? {
            Ok(token) => token,
            Err(refused) => return Ok(Err(refused)),
        };
        let order = match self.buy(client, &purchase_token).await? {
            Ok(order) => order,
            Err(refused) => return Ok(Err(refused)),
        };
        let poll = self.poll(client).await?;
        match poll.status {
            200 => Ok(Ok(order)),
            _ => Ok(Err(poll)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_hint_except_pay() {
        let buyer = Buyer::new("e1", "u1", Some(4));
        assert_eq!(buyer.buy_request("t").path, "/api/events/e1/buy?shards=4");
        assert_eq!(
            buyer.poll_request().path,
            "/api/events/e1/orders/me?shards=4"
        );
        assert_eq!(buyer.pay_request("o1").path, "/api/events/e1/orders/o1/pay");
        let plain = Buyer::new("e1", "u1", None);
        assert_eq!(
            plain.challenge_request().path,
            "/api/events/e1/admission/challenge"
        );
    }

    #[test]
    fn a_field_of_the_expected_status_is_the_product_and_anything_else_the_refusal() {
        let reply = |status, body| Reply {
            status,
            body,
            retry_after_s: None,
        };
        let accepted = reply(202, json!({ "order_id": "o1" }));
        assert_eq!(accepted.field(202, "order_id").unwrap(), "o1");
        let refused = reply(410, json!({ "error": { "code": "sold_out" } }));
        assert_eq!(refused.field(202, "order_id").unwrap_err().status, 410);
        assert!(reply(429, Value::Null).says_later());
    }
}
