//! The test kit: real `redis-server` and real PostgreSQL, each started on a free loopback
//! port in a temp dir and stopped when dropped, and the real host serving real `.wasm` files.
//! No mocks: what passes here runs the same way under `scripts/up.sh` and, for the guests, Spin.
//!
//! One module per concern, every public name re-exported here (`seckill_testkit::TestApp`):
//! - `redis_server` — [`RedisServer`], [`Monitor`]; `pg_server` — [`PgServer`];
//! - `app` — [`TestApp`] and its [`TestAppBuilder`]: the host serving a manifest, and the calls;
//! - [`host_process`] — the host binary as a child process (signals, exit status, log lines);
//! - `manifests` — which manifest to serve and its variables ([`app_vars`], [`over_nodes`], …);
//! - `auth` — the test secrets and [`jwt_for`]; `tls` — [`TestCa`];
//! - [`pow`] — the client's side of the admission gate's proof of work;
//! - `realistic_ids` — test data: [`realistic_ids`] of each of the [`ID_KINDS`];
//! - [`provider`] — the payment provider's side: charges, signed webhooks, redeliveries;
//! - [`stripe`] — [`StripeSandbox`]: Stripe's API (Checkout Sessions, refunds, events,
//!   idempotency, rate limits), its hosted page and its webhooks, in process;
//! - [`walk`] — a buyer's walk through the sale (challenge, admission, precheck, buy, poll,
//!   pay), over any [`walk::Client`]: the tests', the bench's and the demo's one walk;
//! - `transport` — [`rest_transport`]; [`rest_facade`] — the REST stand-in for Upstash;
//! - [`otlp`] — an OpenTelemetry collector's receiving side (OTLP/HTTP, protobuf);
//! - `record` — the API exchange recorder behind the OpenAPI check;
//! - `suite_runs` — [`switches`]: the suite's manifest, transport and node count, from the
//!   environment;
//! - `machine` — [`repo_root`], [`free_port`], finding binaries, waiting for readiness;
//! - `spin_costs` — [`walk_costs`]: what each request of a walk would cost real Spin;
//! - `scratch` — where the servers keep their data (in memory when there is room).
//!
//! Imports go one way: `machine`, `scratch`, `tls`, `auth` and `record` use no other module;
//! `app` is the only module that nothing else uses.

mod app;
mod auth;
pub mod host_process;
mod machine;
mod manifests;
pub mod otlp;
mod pg_server;
pub mod pow;
pub mod provider;
mod realistic_ids;
mod record;
mod redis_server;
pub mod rest_facade;
mod scratch;
mod shop;
mod spin_costs;
pub mod stripe;
mod suite_runs;
mod tls;
mod transport;
pub mod walk;

pub use app::{TEST_POW_DIFFICULTY, TestApp, TestAppBuilder};
pub use auth::{
    ADMIN_TOKEN, ADMISSION_SECRET, JWT_SECRET, OPERATOR, ROTATED_ADMIN_TOKEN, SCHEDULER,
    SCHEDULER_TOKEN, VIEWER, VIEWER_TOKEN, jwt_for, operators,
};
pub use machine::{free_port, repo_root};
pub use manifests::{
    app_vars, derived_from, derived_manifest, faulty_manifest, over_nodes, placement,
    product_manifest,
};
pub use otlp::OtlpReceiver;
pub use pg_server::PgServer;
pub use provider::{PAYMENT_WEBHOOK_SECRET, Provider};
pub use realistic_ids::{ID_KINDS, realistic_ids};
pub use redis_server::{Monitor, RedisServer};
pub use shop::{Received, ShopReceiver};
pub use spin_costs::{Costed, walk_costs};
pub use stripe::StripeSandbox;
pub use suite_runs::{Switches, switches};
pub use tls::TestCa;
pub use transport::rest_transport;
