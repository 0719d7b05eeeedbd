//! The triggers, as Spin's `trigger-http` and spin-trigger-cron run them: [`http`] (with
//! [`routes`] and the request [`classes`] the manifest declares) and [`cron`]; [`serve`] serves
//! the HTTP trigger as a production runtime (connection limits, timeouts, graceful shutdown,
//! lingering close) and [`metrics`] counts what it serves.

pub mod classes;
pub mod cron;
pub mod http;
pub mod metrics;
pub mod routes;
pub mod serve;
