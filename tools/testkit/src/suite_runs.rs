//! The switches of the whole suite, read once from the environment: which product manifest
//! the tests serve (`SECKILL_MANIFEST`), how the app reaches Redis (`SECKILL_TRANSPORT`) and
//! over how many nodes (`SECKILL_REDIS_NODES`). `scripts/test.sh` sets all three for each of
//! its passes; unset, each is its default. A test process says once which it runs under; an
//! unknown value fails every test that reads it.

use std::sync::OnceLock;

use anyhow::{Result, bail};

/// What the suite runs under.
#[derive(Debug)]
pub struct Switches {
    /// `spin.toml` (default) or `spin.http.toml`.
    pub manifest: String,
    /// Whether the app reaches every Redis node through a REST facade (`rest`; default
    /// `redis`: Redis's own protocol).
    pub rest: bool,
    /// How many `redis-server`s a product manifest's one Redis node becomes (default 1).
    pub redis_nodes: usize,
}

impl Switches {
    /// From the environment's values (`None`: unset).
    fn parse(manifest: Option<&str>, transport: Option<&str>, nodes: Option<&str>) -> Result<Self> {
        let manifest = match manifest.unwrap_or("spin.toml") {
            m @ ("spin.toml" | "spin.http.toml") => m.to_owned(),
            other => bail!("SECKILL_MANIFEST is spin.toml or spin.http.toml, not {other:?}"),
        };
        let rest = match transport.unwrap_or("redis") {
            "redis" => false,
            "rest" => true,
            other => bail!("SECKILL_TRANSPORT is redis or rest, not {other:?}"),
        };
        let redis_nodes = match nodes.unwrap_or("1").parse() {
            Ok(n) if n >= 1 => n,
            _ => bail!("SECKILL_REDIS_NODES is a node count of 1 or more, not {nodes:?}"),
        };
        Ok(Switches {
            manifest,
            rest,
            redis_nodes,
        })
    }
}

/// The suite's switches, read (and told on stderr) the first time; panics on an unknown value.
pub fn switches() -> &'static Switches {
    static SWITCHES: OnceLock<Switches> = OnceLock::new();
    SWITCHES.get_or_init(|| {
        let var = |name| std::env::var(name).ok();
        let (manifest, transport, nodes) = (
            var("SECKILL_MANIFEST"),
            var("SECKILL_TRANSPORT"),
            var("SECKILL_REDIS_NODES"),
        );
        let switches = Switches::parse(manifest.as_deref(), transport.as_deref(), nodes.as_deref())
            .unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "test kit: SECKILL_MANIFEST={} SECKILL_TRANSPORT={} SECKILL_REDIS_NODES={}",
            switches.manifest,
            if switches.rest { "rest" } else { "redis" },
            switches.redis_nodes
        );
        switches
    })
}

#[cfg(test)]
mod tests {
    use super::Switches;

    #[test]
    fn unset_switches_are_the_defaults() {
        let s = Switches::parse(None, None, None).unwrap();
        assert_eq!(
            (s.manifest.as_str(), s.rest, s.redis_nodes),
            ("spin.toml", false, 1)
        );
        let s = Switches::parse(Some("spin.http.toml"), Some("rest"), Some("3")).unwrap();
        assert_eq!(
            (s.manifest.as_str(), s.rest, s.redis_nodes),
            ("spin.http.toml", true, 3)
        );
    }

    #[test]
    fn an_unknown_value_is_refused_by_name() {
        for (manifest, transport, nodes, named) in [
            (Some("spin.yaml"), None, None, "SECKILL_MANIFEST"),
            (None, Some("http"), None, "SECKILL_TRANSPORT"),
            (None, None, Some("three"), "SECKILL_REDIS_NODES"),
            (None, None, Some("0"), "SECKILL_REDIS_NODES"),
        ] {
            let e = Switches::parse(manifest, transport, nodes).unwrap_err();
            assert!(e.to_string().starts_with(named), "{e}");
        }
    }
}
