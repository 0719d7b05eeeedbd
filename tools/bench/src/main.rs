//! `seckill-bench`: the benchmark suite. Every row is measured in the same run on this machine:
//! raw Redis, the host serving a trivial component, and the sale's endpoints end to end. It
//! prints a table; nothing here asserts (that is the tests' job).
//!
//! One module per part of the table, in the order of its rows: [`raw_redis`], [`hello`],
//! [`buy`] (with its transports), [`endpoints`] (with the [`spike`]), [`spin_costs`] (what each hot route would cost
//! real Spin per request, counted), [`native`], [`scale`], [`drain`]. They share
//! [`server`] (the processes under test), [`fixture`] (events and buyers set up natively),
//! [`measure`] (rows over one endpoint), [`load`] (the generator) and [`table`].

mod buy;
mod demo;
mod drain;
mod endpoints;
mod fixture;
mod hello;
mod load;
mod measure;
mod native;
mod options;
mod raw_redis;
mod routes;
mod scale;
mod server;
mod spike;
mod spin_costs;
mod table;
mod wire;

use anyhow::Result;
use clap::Parser;
use options::{Only, SuiteArgs};
use seckill_testkit::{PgServer, RedisServer, TestCa};
use table::Row;

/// seckill's benchmarks and the simulated sale.
#[derive(Parser)]
enum Cli {
    /// The benchmark suite: a table of figures measured in one run.
    Suite(SuiteArgs),
    /// A simulated sale end to end, with a report and a chart.
    Demo(demo::DemoArgs),
    /// The native baseline server (started by `suite`).
    NativeServe(native::NativeArgs),
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse() {
        Cli::Suite(args) => suite(args).await,
        Cli::Demo(args) => demo::run(args).await,
        Cli::NativeServe(args) => native::serve(args).await,
    }
}

/// Runs the suite: its servers, then the rows, then the table and what follows it.
async fn suite(args: SuiteArgs) -> Result<()> {
    // Plain TCP for every row, and a TLS port beside it for the TLS rows.
    let ca = TestCa::new()?;
    let redis = RedisServer::start_tls(&ca)?;
    let pg = PgServer::start()?;
    let mut after = Vec::new();
    table::print(&rows(&args, &ca, &redis, &pg, &mut after).await?);
    for text in after {
        println!("\n{text}");
    }
    Ok(())
}

/// The rows of the parts `args.only` selects (every part by default), in the table's order;
/// what is printed after the table goes to `after` (the scale part's capacity table).
async fn rows(
    args: &SuiteArgs,
    ca: &TestCa,
    redis: &RedisServer,
    pg: &PgServer,
    after: &mut Vec<String>,
) -> Result<Vec<Row>> {
    let vars = seckill_testkit::app_vars(redis, pg);
    let drain = || drain::row(redis, pg, &vars, args.backlog);
    match args.only {
        Some(Only::Scale) => return scale_rows(pg, args, after).await,
        Some(Only::Drain) => return Ok(vec![drain().await?]),
        Some(Only::SpinCosts) => return spin_costs::rows(&vars).await,
        Some(Only::Routes) => return routes::rows(redis, &vars, args).await,
        Some(Only::Spike) => return spike::rows(redis, pg, &vars, args).await,
        Some(Only::Hello | Only::Buy) | None => {}
    }
    // The drain runs first, as later rows leave orders of their own behind; its row goes last.
    let drain = match args.only {
        None => Some(drain().await?),
        Some(_) => None,
    };
    let mut rows = raw_redis::rows(redis)?;
    let (hello, hello_rps) = hello::rows(redis, pg, args).await?;
    rows.extend(hello);
    if args.only == Some(Only::Hello) {
        return Ok(rows);
    }
    let (buy, sale) = buy::rows(redis, ca, &vars, hello_rps, args).await?;
    rows.extend(buy);
    if args.only == Some(Only::Buy) {
        return Ok(rows);
    }
    let wasm_rps = sale.rps;
    rows.extend(endpoints::rows(sale, redis, args).await?);
    rows.extend(spin_costs::rows(&vars).await?);
    rows.push(native::row(redis, wasm_rps, args).await?);
    rows.extend(scale_rows(pg, args, after).await?);
    rows.extend(drain);
    Ok(rows)
}

/// The scale part's rows; its capacity table goes to `after`.
async fn scale_rows(pg: &PgServer, args: &SuiteArgs, after: &mut Vec<String>) -> Result<Vec<Row>> {
    let (rows, capacity) = scale::rows(pg, args).await?;
    after.push(capacity);
    Ok(rows)
}
