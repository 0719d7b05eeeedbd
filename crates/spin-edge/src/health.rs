//! Health of the function's dependencies, checked through the same Spin interfaces the sale path
//! uses: a Redis `PING` on every node and a Postgres `SELECT 1`. The public summary is shared
//! through the first node for [`PUBLIC_WINDOW_MS`]: a flood of public checks costs one
//! round trip each, and every node and Postgres are probed once per window, not once per call.

use serde::{Deserialize, Serialize};
use spin_sdk::pg4;

use seckill_domain::nodes::Nodes;
use seckill_domain::{clock, scripts};

use crate::config;
use crate::error::ApiError;
use crate::store::{self, SpinStore};

/// How long a public summary answers for every instance. Short enough that a monitor sees an
/// outage within a few seconds; an operator's `GET /admin/health` always probes afresh.
pub const PUBLIC_WINDOW_MS: u64 = 2_000;

/// One dependency's state.
#[derive(Debug, Serialize)]
pub struct Probe {
    /// Whether it answered correctly.
    pub ok: bool,
    /// Round trip, including opening the connection.
    pub latency_ms: u64,
    /// Why not, when `ok` is false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The detailed report, for operators (`GET /admin/health`).
#[derive(Debug, Serialize)]
pub struct Health {
    /// Both dependencies are fine.
    pub ok: bool,
    /// Redis, the hot path.
    pub redis: Probe,
    /// Postgres, where orders land.
    pub postgres: Probe,
}

/// A dependency's state as anyone may see it: no latency, no error text (error texts can name
/// hosts and, with `RUST_BACKTRACE` set, carry a host stack trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// It answered correctly.
    Ok,
    /// It did not.
    Degraded,
}

/// The public report (`GET /api/health`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Both dependencies are fine.
    pub ok: bool,
    /// Redis, the hot path.
    pub redis: State,
    /// Postgres, where orders land.
    pub postgres: State,
}

impl Health {
    /// What the public may see of this report.
    pub fn summary(&self) -> Summary {
        let state = |p: &Probe| if p.ok { State::Ok } else { State::Degraded };
        Summary {
            ok: self.ok,
            redis: state(&self.redis),
            postgres: state(&self.postgres),
        }
    }
}

fn probe(f: impl FnOnce() -> Result<(), String>) -> Probe {
    let start = clock::now_ms();
    let result = f();
    Probe {
        ok: result.is_ok(),
        latency_ms: clock::now_ms().saturating_sub(start),
        error: result.err(),
    }
}

/// The public summary: the one a full probe stored on the first node within the window, or a
/// full probe's, then stored for the others. A first node that cannot keep it costs only the
/// sharing, never the answer.
pub fn summary() -> Summary {
    let nodes = store::nodes();
    let first = || nodes.as_ref().ok()?.all().next()?.ok();
    let shared = first()
        .and_then(|node| scripts::health::read(node).ok().flatten())
        .and_then(|text| serde_json::from_str(&text).ok());
    if let Some(summary) = shared {
        return summary;
    }
    let summary = check_nodes(&nodes).summary();
    if let (Some(node), Ok(text)) = (first(), serde_json::to_string(&summary)) {
        let _ = scripts::health::store(node, &text, PUBLIC_WINDOW_MS);
    }
    summary
}

/// Probes every node and Postgres afresh.
pub fn check() -> Health {
    check_nodes(&store::nodes())
}

fn check_nodes(nodes: &Result<Nodes<SpinStore>, ApiError>) -> Health {
    // Every node must answer: an event on a dead node cannot sell.
    let redis = probe(|| {
        let nodes = nodes.as_ref().map_err(|e| e.message.clone())?;
        // Errors name a node by its place in the list (`node 2 is down: …`): URLs may carry
        // passwords.
        for (i, node) in nodes.all().enumerate() {
            let node = node.map_err(|e| e.message)?;
            node.ping().map_err(|e| format!("node {i}: PING: {e}"))?;
        }
        Ok(())
    });
    let postgres = probe(|| {
        let url = config::get(config::PG_URL).map_err(|e| e.message)?;
        let conn = pg4::Connection::open(&url).map_err(|e| format!("open: {e:?}"))?;
        let rows = conn
            .query("SELECT 1::int4", &[])
            .map_err(|e| format!("SELECT 1: {e:?}"))?;
        match rows.rows.as_slice() {
            [row] if matches!(row.as_slice(), [pg4::DbValue::Int32(1)]) => Ok(()),
            other => Err(format!("unexpected reply {other:?}")),
        }
    });
    Health {
        ok: redis.ok && postgres.ok,
        redis,
        postgres,
    }
}
