//! Which manifest a test serves and the variables it needs: the product manifests, the
//! manifests derived from `spin.toml`, and the variables pointing at the test's servers.

use anyhow::Result;

use crate::auth::{ADMISSION_SECRET, JWT_SECRET, operators};
use crate::machine::repo_root;
use crate::pg_server::PgServer;
use crate::redis_server::RedisServer;

/// The product manifest the sale tests serve: `spin.toml` (self-hosted Spin, cron plugin), or
/// `spin.http.toml`, the manifest every platform accepts, as `SECKILL_MANIFEST` (one of the
/// suite's [`switches`](crate::suite_runs::switches)) says.
pub fn product_manifest() -> &'static str {
    &crate::suite_runs::switches().manifest
}

/// Whether `manifest` is one of the product's, whose routes `api/openapi.yaml` describes and
/// whose Redis nodes the REST transport fronts (test manifests are neither).
pub(crate) fn is_product(manifest: &str) -> bool {
    manifest == "spin.toml" || manifest == "spin.http.toml"
}

/// The variables the product manifests need, pointing at these servers.
pub fn app_vars(redis: &RedisServer, pg: &PgServer) -> Vec<(&'static str, String)> {
    vec![
        ("redis_url", redis.url()),
        ("redis_origin", format!("redis://{}", redis.host())),
        ("pg_url", pg.url()),
        ("pg_host", pg.host()),
        ("jwt_secret", JWT_SECRET.into()),
        ("admission_secret", ADMISSION_SECRET.into()),
        ("operators", operators()),
        (
            "payment_webhook_secrets",
            crate::provider::PAYMENT_WEBHOOK_SECRET.into(),
        ),
    ]
}

/// Folds the entries of `vars` that `manifest` (relative to the repo root) does not declare as
/// application variables into its `settings` variable (`name=value,…`): a test names the
/// drain's knobs one by one (`("drain_lease_ms", "500")`), the product manifests take them as
/// one variable (`crates/spin-edge/src/config.rs`, `Settings`). A manifest without `settings`
/// gets `vars` unchanged.
pub(crate) fn fold_settings(manifest: &str, vars: &mut Vec<(&str, String)>) -> Result<()> {
    let text = std::fs::read_to_string(repo_root().join(manifest))?;
    let parsed: toml::Table = toml::from_str(&text)?;
    let declared = parsed
        .get("variables")
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    if !declared.contains_key("settings") {
        return Ok(());
    }
    let (app, knobs): (Vec<_>, Vec<_>) = std::mem::take(vars)
        .into_iter()
        .partition(|(name, _)| declared.contains_key(*name));
    *vars = app;
    if !knobs.is_empty() {
        let mut settings: Vec<String> = vars
            .iter()
            .filter(|(name, _)| *name == "settings")
            .map(|(_, v)| v.clone())
            .collect();
        settings.extend(knobs.iter().map(|(name, value)| format!("{name}={value}")));
        vars.retain(|(name, _)| *name != "settings");
        vars.push(("settings", settings.join(",")));
    }
    Ok(())
}

/// Points `vars` (from [`app_vars`]) at several Redis nodes: `redis_url` lists them all and
/// `redis_origin` lets the functions reach any loopback port.
pub fn over_nodes(vars: &mut [(&str, String)], nodes: &[&RedisServer]) {
    for (k, v) in vars.iter_mut() {
        match *k {
            "redis_url" => *v = nodes.iter().map(|n| n.url()).collect::<Vec<_>>().join(","),
            "redis_origin" => *v = "redis://127.0.0.1:*".into(),
            _ => {}
        }
    }
}

/// Where `crates/domain/src/nodes.rs` puts `event` over `nodes`: the index of the node holding
/// its own slot (master configuration, registry entry), and of the node holding each of its
/// `shards` shards.
pub fn placement(event: &str, shards: u32, nodes: &[&RedisServer]) -> (usize, Vec<usize>) {
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let event = seckill_domain::event::EventId::parse(event).expect("a valid event id");
    let master = seckill_domain::nodes::index_for(&event, &urls);
    let shards = (0..shards)
        .map(|s| seckill_domain::nodes::index_for_shard(&event, s, &urls))
        .collect();
    (master, shards)
}

/// The product manifest with the jobs component swapped for the tests' `faulty-jobs` build
/// (seckill-domain's `fault-injection` feature) and its `fault_injection` variable declared.
/// Generated from `spin.toml` on every call, so the two never drift; returns its path relative
/// to the repo root, for [`TestApp::start`](crate::app::TestApp::start).
pub fn faulty_manifest() -> Result<String> {
    derived_manifest(
        "faults.toml",
        &[
            (
                "[variables]\n",
                "[variables]\nfault_injection = { default = \"\" }\n",
            ),
            ("/release/jobs.wasm\"", "/release/faulty_jobs.wasm\""),
            (
                "[component.jobs.variables]\n",
                "[component.jobs.variables]\nfault_injection = \"{{ fault_injection }}\"\n",
            ),
        ],
    )
}

/// `spin.toml` with `edits` (each `from` must occur), written as
/// `target/test-manifests/<name>` with its sources pointing back at the build; returns that
/// path, relative to the repo root.
pub fn derived_manifest(name: &str, edits: &[(&str, &str)]) -> Result<String> {
    derived_from("spin.toml", name, edits)
}

/// [`derived_manifest`] of `product` (`spin.toml` or `spin.http.toml`).
pub fn derived_from(product: &str, name: &str, edits: &[(&str, &str)]) -> Result<String> {
    let product = std::fs::read_to_string(repo_root().join(product))?;
    let mut text = product.replace("source = \"target/", "source = \"../../target/");
    for (from, to) in edits {
        anyhow::ensure!(text.contains(from), "the manifest changed: no {from:?}");
        text = text.replace(from, to);
    }
    // Test processes run at once: write aside, then rename (atomic), never a half file.
    let relative = format!("target/test-manifests/{name}");
    let path = repo_root().join(&relative);
    std::fs::create_dir_all(path.parent().expect("a directory"))?;
    let aside = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&aside, text)?;
    std::fs::rename(&aside, &path)?;
    Ok(relative)
}
