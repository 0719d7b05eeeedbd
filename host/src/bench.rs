//! Measurements of the host itself (printed by `seckill-host bench-instantiate`, never asserted).

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};

use crate::app::App;

/// Average cost of what every request pays before the guest runs: a new `Store` with a fresh
/// `Ctx`, and instantiating the pre-instantiated component from the pooling allocator.
pub async fn instantiate(app: &App, component: &str, iterations: u32) -> Result<Duration> {
    let runtime = app.runtime();
    let c = runtime
        .find(component)
        .ok_or_else(|| anyhow!("no component `{component}`"))?;
    let pre = app
        .http
        .handler(c)
        .ok_or_else(|| anyhow!("`{component}` is not an HTTP component"))?;
    // Warm the pool's slots first.
    for _ in 0..100 {
        let mut store = runtime.store(c);
        pre.instantiate_async(&mut store).await?;
    }
    let start = Instant::now();
    for _ in 0..iterations {
        let mut store = runtime.store(c);
        pre.instantiate_async(&mut store).await?;
    }
    Ok(start.elapsed() / iterations.max(1))
}
