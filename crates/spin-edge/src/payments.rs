//! The payment provider's API over Spin's outbound HTTP: the domain's
//! [`seckill_domain::checkout::ProviderApi`], authenticated with the restricted secret key
//! from `payment_api_key`, at the pinned `Stripe-Version`.

use seckill_domain::checkout::{API_VERSION, ApiAnswer, ApiCall, ProviderApi};
use seckill_domain::error::Error;
use seckill_domain::nodes::Nodes;
use seckill_domain::sql::Sql;
use seckill_domain::store::Store;
use seckill_domain::{jobs, orders};

use crate::config::{self, Settings};
use crate::error::ApiError;
use crate::outbound::{self, Outbound};

/// The provider's API base URL (`https://api.stripe.com`; the local sandbox's on one machine).
pub const PAYMENT_API_URL: &str = "payment_api_url";
/// The restricted secret key (`rk_…`); empty: no provider API (payments are recorded without a
/// checkout, and confirmed only by signed events).
pub const PAYMENT_API_KEY: &str = "payment_api_key";

/// The provider's API, as configured.
pub struct ProviderClient {
    https: bool,
    authority: String,
    bearer: String,
}

impl ProviderClient {
    /// The configured provider, or `None` when `payment_api_key` is empty.
    pub fn configured() -> Result<Option<Self>, ApiError> {
        let key = config::get(PAYMENT_API_KEY)?;
        if key.trim().is_empty() {
            return Ok(None);
        }
        let url = config::get(PAYMENT_API_URL)?;
        let (scheme, authority) = url
            .trim_end_matches('/')
            .split_once("://")
            .filter(|(s, a)| matches!(*s, "https" | "http") && !a.is_empty() && !a.contains('/'))
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "{PAYMENT_API_URL} is not an http(s) origin: {url:?}"
                ))
            })?;
        Ok(Some(ProviderClient {
            https: scheme == "https",
            authority: authority.to_owned(),
            bearer: format!("Bearer {}", key.trim()),
        }))
    }
}

impl ProviderApi for ProviderClient {
    fn call(&self, call: &ApiCall) -> Result<ApiAnswer, String> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&call.form)
            .finish();
        let path = match call.post {
            true => call.path.clone(),
            false if body.is_empty() => call.path.clone(),
            false => format!("{}?{body}", call.path),
        };
        let mut headers: Vec<(&str, &[u8])> = vec![
            ("authorization", self.bearer.as_bytes()),
            ("stripe-version", API_VERSION.as_bytes()),
        ];
        if call.post {
            headers.push(("content-type", b"application/x-www-form-urlencoded"));
        }
        if let Some(key) = &call.idempotency_key {
            headers.push(("idempotency-key", key.as_bytes()));
        }
        let (status, body) = outbound::send(&Outbound {
            https: self.https,
            authority: &self.authority,
            post: call.post,
            path: &path,
            headers: &headers,
            body: if call.post { body.as_bytes() } else { b"" },
        })?;
        Ok(ApiAnswer { status, body })
    }
}

/// Timeout release as its launchers run it (the cron trigger once, the jobs route for a
/// budget: [`jobs::release_for`]), with the configured provider: the open checkout sessions of
/// orders past their deadline closed there, then what may go released.
pub fn release_for(
    nodes: &Nodes<impl Store>,
    db: &impl Sql,
    settings: &Settings,
    budget: std::time::Duration,
) -> Result<jobs::Repeated<orders::ReleaseReport>, Error> {
    let client = ProviderClient::configured().map_err(|e| Error::bug(e.reason()))?;
    let provider = client.as_ref().map(|api| orders::Provider {
        api,
        mode: settings.payment_mode,
        budget: orders::SESSIONS_PER_RUN,
    });
    jobs::release_for(nodes, db, provider.as_ref(), settings.release_batch, budget)
}
