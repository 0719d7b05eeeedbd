//! The suite's settings, parsed by `main` and read by every part: below them all, so that no
//! part imports the binary's root.

use std::time::Duration;

/// Settings of the benchmark suite.
#[derive(clap::Args)]
pub struct SuiteArgs {
    /// Seconds per row.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Buyers prepared for the buy rows (each buys once).
    #[arg(long, default_value_t = 60_000)]
    pub users: usize,
    /// Orders in the drain backlog.
    #[arg(long, default_value_t = 200_000)]
    pub backlog: usize,
    /// `wasmtime` (wasmtime-cli 48.0.8) for the outside reference row; `scripts/bench.sh`
    /// installs it there on demand. The row is left empty when it is missing.
    #[arg(long, default_value = ".data/tools/bin/wasmtime")]
    pub wasmtime: std::path::PathBuf,
    /// Run a part only: `hello`, `buy` (hello, time and buy), `drain`, `scale` (one hot
    /// event's whole sale on 1, 2 and 4 Redis nodes, then a capacity table), `spin-costs` (Spin's costs per
    /// request of poll, buy, precheck and admission, counted by the host) or `routes` (those
    /// four routes on our host plain and Spin-faithful, over redis:// and REST, side by side,
    /// then the counts) or `spike` (the poll in closed loop, then a crowd of polls and buys at 3×
    /// its rate with webhooks and drain jobs beside it, a connection each and then over
    /// keep-alive connections: per request class answered, shed, dropped).
    #[arg(long, value_enum)]
    pub only: Option<Only>,
}

impl SuiteArgs {
    /// How long each row runs.
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.seconds)
    }
}

/// The parts `--only` runs.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    Hello,
    Buy,
    Scale,
    Drain,
    SpinCosts,
    Routes,
    Spike,
}
