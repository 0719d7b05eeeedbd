//! The `hello` part: the host serving a trivial component, and `wasmtime serve` serving the
//! same component as the outside reference for the host's own speed.

use std::process::{Command, Stdio};

use anyhow::Result;
use seckill_testkit::{PgServer, RedisServer, repo_root};

use crate::measure::get_loop;
use crate::options::SuiteArgs;
use crate::server::{HostProcess, ServerProcess, local_addr};
use crate::table::Row;

/// The hello rows, and the host's hello req/s (what later rows compare with).
pub async fn rows(redis: &RedisServer, pg: &PgServer, args: &SuiteArgs) -> Result<(Vec<Row>, f64)> {
    let vars = [
        ("redis_host", redis.host()),
        ("pg_host", pg.host()),
        ("present", "x".into()),
    ];
    let hello = HostProcess::start("tests/manifests/conformance.toml", &vars, false)?;
    let report = get_loop(hello.addr, "/hello", args).await?;
    drop(hello);
    let hello_rps = report.rps();
    let rows = vec![
        Row::measured("host: hello component", report, ""),
        wasmtime_serve(args, hello_rps).await?,
    ];
    Ok((rows, hello_rps))
}

/// `wasmtime serve -O pooling-allocator` serving the same hello component; left empty when
/// `args.wasmtime` is missing.
async fn wasmtime_serve(args: &SuiteArgs, hello_rps: f64) -> Result<Row> {
    let name = "wasmtime serve -O pooling-allocator (48.0.8): hello component";
    let wasmtime = repo_root().join(&args.wasmtime);
    let Ok(version) = Command::new(&wasmtime).arg("--version").output() else {
        return Ok(Row::noted(
            name,
            format!(
                "{} not found: scripts/bench.sh installs it",
                wasmtime.display()
            ),
        ));
    };
    let addr = local_addr()?;
    let mut cmd = Command::new(&wasmtime);
    cmd.args(["serve", "-O", "pooling-allocator", "-S", "cli", "--addr"])
        .arg(addr.to_string())
        .arg(repo_root().join("target/wasm32-wasip2/release/hello.wasm"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let server = ServerProcess::spawn(cmd, addr)?;
    let report = get_loop(server.addr, "/hello", args).await?;
    let note = format!(
        "{}; our host = {:.2}× this;",
        String::from_utf8_lossy(&version.stdout).trim(),
        hello_rps / report.rps()
    );
    Ok(Row::measured(name, report, note))
}
