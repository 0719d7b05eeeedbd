//! What each request of a buyer's walk would cost real Spin, as the host counts it
//! (`seckill_host::factors::spin_costs`, which cites Spin's files): `tests/tests/spin_costs.rs` pins it,
//! the bench's `spin-costs` part prints it.

use std::sync::Mutex;

use anyhow::{Result, bail, ensure};
use seckill_host::SpinCostTotals;

use crate::app::TestApp;
use crate::walk::{Client, Reply, Request, Step};

/// One request of the walk, run alone: its step, status, the one component that ran and what
/// its instance cost.
#[derive(Debug, Clone)]
pub struct Costed {
    pub step: Step,
    pub status: u16,
    pub component: String,
    pub totals: SpinCostTotals,
}

/// Sends each request alone on `app` and keeps what it cost.
struct Metered<'a> {
    app: &'a TestApp,
    costed: Mutex<Vec<Costed>>,
}

impl Client for Metered<'_> {
    async fn send(&self, request: Request) -> Result<Reply> {
        let step = request.step;
        self.app.app.reset_spin_costs();
        let reply = self.app.send(request).await?;
        let ran: Vec<(String, SpinCostTotals)> = self
            .app
            .app
            .spin_costs()
            .into_iter()
            .filter(|(_, totals)| *totals != SpinCostTotals::default())
            .collect();
        let [(component, totals)] = <[_; 1]>::try_from(ran)
            .map_err(|ran| anyhow::anyhow!("{}: not one component ran: {ran:?}", step.name()))?;
        self.costed.lock().unwrap().push(Costed {
            step,
            status: reply.status,
            component,
            totals,
        });
        Ok(reply)
    }
}

/// `user`'s walk through `event` on `app` ([`crate::walk::Buyer::walk`]), each request run
/// alone: what each cost, in the walk's order. The walk must end in an order.
pub async fn walk_costs(app: &TestApp, event: &str, user: &str) -> Result<Vec<Costed>> {
    let metered = Metered {
        app,
        costed: Mutex::default(),
    };
    if let Err(refused) = app.buyer(event, user).walk(&metered).await? {
        bail!(
            "{user}'s walk ended at {}: {}",
            refused.status,
            refused.body
        );
    }
    let costed = metered.costed.into_inner().unwrap();
    ensure!(
        costed.iter().all(|c| c.totals.instances == 1),
        "one instance per request: {costed:?}"
    );
    Ok(costed)
}
