//! The jobs function, unchanged, compiled with the test-only `fault-injection` feature: the
//! `fault_injection` variable then makes the drain die at chosen points. Never deployed.

#[path = "../../../../functions/jobs/src/lib.rs"]
mod jobs;
