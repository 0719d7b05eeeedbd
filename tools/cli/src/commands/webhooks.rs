//! `webhooks`: the order events' endpoints (`/admin/webhooks`).

use clap::Subcommand;
use serde_json::json;

use super::Output;
use super::show;
use crate::api::{Api, Failure};
use crate::render;

/// What to do with the endpoints.
#[derive(Debug, Subcommand)]
pub enum Webhooks {
    /// Every endpoint and how its deliveries go.
    List,
    /// Register an endpoint (an https URL of a public host); prints its signing secret, which
    /// is shown this once.
    Add {
        /// Where the events go (`--url` is the admin API's).
        #[arg(value_name = "URL")]
        endpoint_url: String,
        /// What it is (the shop's fulfilment, CRM, …).
        #[arg(long, default_value = "")]
        description: String,
    },
    /// A new signing secret (printed this once); the old one signs beside it for a day.
    Rotate {
        /// The endpoint's id (`ep_…`).
        endpoint: String,
    },
    /// Stop an endpoint's deliveries; its events wait.
    Disable {
        /// The endpoint's id.
        endpoint: String,
    },
    /// Restart an endpoint's deliveries, at the event it stopped at.
    Enable {
        /// The endpoint's id.
        endpoint: String,
    },
    /// Send events again: one message, or every event of a time range.
    Replay {
        /// The endpoint's id.
        endpoint: String,
        /// The message (its webhook-id).
        #[arg(long, conflicts_with_all = ["from_ms", "to_ms"], required_unless_present = "from_ms")]
        msg: Option<String>,
        /// The range's start, Unix ms.
        #[arg(long, requires = "to_ms")]
        from_ms: Option<i64>,
        /// The range's end (not included), Unix ms.
        #[arg(long, requires = "from_ms")]
        to_ms: Option<i64>,
    },
    /// An endpoint's delivery log, newest first.
    Deliveries {
        /// The endpoint's id.
        endpoint: String,
        /// How many (1-500).
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Remove an endpoint and its log.
    Remove {
        /// The endpoint's id.
        endpoint: String,
    },
}

/// Runs `what`.
pub fn run(cli: Output, api: &Api, what: &Webhooks) -> Result<(), Failure> {
    let at = |id: &str, rest: &str| format!("/admin/webhooks/{id}{rest}");
    match what {
        Webhooks::List => show(cli, &api.get("/admin/webhooks")?, render::endpoints),
        Webhooks::Add {
            endpoint_url,
            description,
        } => {
            let body = json!({ "url": endpoint_url, "description": description });
            show(
                cli,
                &api.send("POST", "/admin/webhooks", Some(&body))?,
                render::made_secret,
            );
        }
        Webhooks::Rotate { endpoint } => {
            let made = api.send("POST", &at(endpoint, "/rotate"), None)?;
            show(cli, &made, render::made_secret);
        }
        Webhooks::Disable { endpoint } => {
            show(
                cli,
                &api.send("POST", &at(endpoint, "/disable"), None)?,
                render::endpoint,
            );
        }
        Webhooks::Enable { endpoint } => {
            show(
                cli,
                &api.send("POST", &at(endpoint, "/enable"), None)?,
                render::endpoint,
            );
        }
        Webhooks::Replay {
            endpoint,
            msg,
            from_ms,
            to_ms,
        } => {
            let body = match msg {
                Some(msg) => json!({ "msg_id": msg }),
                None => json!({ "from_ms": from_ms, "to_ms": to_ms }),
            };
            let queued = api.send("POST", &at(endpoint, "/replay"), Some(&body))?;
            show(cli, &queued, |v| {
                format!("{} events queued to send again", v["queued"])
            });
        }
        Webhooks::Deliveries { endpoint, limit } => {
            let log = api.get(&at(endpoint, &format!("/deliveries?limit={limit}")))?;
            show(cli, &log, render::deliveries);
        }
        Webhooks::Remove { endpoint } => {
            let removed = api.send("DELETE", &at(endpoint, ""), None)?;
            show(cli, &removed, |v| {
                format!("removed {}", render::text(&v["removed"]))
            });
        }
    }
    Ok(())
}
