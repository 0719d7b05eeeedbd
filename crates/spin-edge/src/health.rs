//! Health of the function's dependencies, checked through the same Spin interfaces the sale path
//! uses: a Redis `PING` and a Postgres `SELECT 1`.

use serde::Serialize;
use spin_sdk::pg4;

use seckill_domain::clock;

use crate::config;
use crate::store::SpinStore;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// It answered correctly.
    Ok,
    /// It did not.
    Degraded,
}

/// The public report (`GET /api/health`).
#[derive(Debug, Serialize)]
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

/// Pings both dependencies.
pub fn check() -> Health {
    // Every node must answer: an event on a dead node cannot sell.
    let redis = probe(|| {
        let urls = config::get(config::REDIS_URL).map_err(|e| e.message)?;
        // Errors name a node by its place in the list: URLs may carry passwords.
        for (i, url) in seckill_domain::nodes::parse(&urls).into_iter().enumerate() {
            let node = SpinStore::open(url).map_err(|e| format!("node {i}: open: {e}"))?;
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
