//! `spin.toml` (manifest version 2): the subset seckill's host supports, parsed strictly.
//!
//! Anything the host does not implement is a startup error that names the manifest line, never
//! silently ignored: unknown keys are rejected by `deny_unknown_fields`, and the semantic checks
//! below (routes, component references, cron expressions, templates) carry the span of the value.

pub mod expressions;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// A manifest error that points at the offending line of `spin.toml`.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct ManifestError {
    /// The manifest file.
    pub path: PathBuf,
    /// 1-based line of the offending value (0 when unknown).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The parsed manifest, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Must be 2.
    pub spin_manifest_version: Spanned<u32>,
    /// `[application]`.
    pub application: Application,
    /// `[variables]`: application variables and how they get their values.
    #[serde(default)]
    pub variables: BTreeMap<Spanned<String>, VariableDef>,
    /// `[[trigger.http]]` and `[[trigger.cron]]`.
    #[serde(default)]
    pub trigger: Triggers,
    /// `[component.<id>]`.
    #[serde(default)]
    pub component: BTreeMap<Spanned<String>, ComponentDef>,
}

/// `[application]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Application {
    /// Application name.
    pub name: String,
    /// Application version.
    #[serde(default)]
    pub version: Option<String>,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// Free text.
    #[serde(default)]
    pub authors: Vec<String>,
    /// Settings of tools and plugins, which Spin ignores (spin v3.6.3
    /// `crates/manifest/src/schema/v2.rs`, `AppDetails::tool`); this host reads `seckill`'s
    /// request classes ([`crate::trigger::classes`]).
    #[serde(default)]
    pub tool: BTreeMap<String, toml::Table>,
}

/// One entry of `[variables]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableDef {
    /// Value used when no provider has one.
    #[serde(default)]
    pub default: Option<String>,
    /// Startup fails when no provider has a value.
    #[serde(default)]
    pub required: bool,
    /// Never logged.
    #[serde(default)]
    pub secret: bool,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
}

/// The triggers this host implements. Any other trigger type is an unknown key, hence an error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Triggers {
    /// `[[trigger.http]]`.
    #[serde(default)]
    pub http: Vec<HttpTriggerDef>,
    /// `[[trigger.cron]]` (the spin-trigger-cron plugin).
    #[serde(default)]
    pub cron: Vec<CronTriggerDef>,
}

/// `[[trigger.http]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpTriggerDef {
    /// Optional trigger id.
    #[serde(default)]
    pub id: Option<String>,
    /// `/exact`, `/with/:param`, `/prefix/...`.
    pub route: Spanned<String>,
    /// The id of a `[component.<id>]`.
    pub component: Spanned<String>,
}

/// `[[trigger.cron]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CronTriggerDef {
    /// Optional trigger id.
    #[serde(default)]
    pub id: Option<String>,
    /// The id of a `[component.<id>]`.
    pub component: Spanned<String>,
    /// Seconds first: `sec min hour day-of-month month day-of-week [year]`.
    pub cron_expression: Spanned<String>,
}

/// `[component.<id>]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentDef {
    /// Path of the `.wasm` file, relative to the manifest.
    pub source: Spanned<String>,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// `scheme://host[:port]` patterns, `*` wildcards, `{{ var }}` templates.
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<Spanned<String>>,
    /// Component variables: name → template over application variables.
    #[serde(default)]
    pub variables: BTreeMap<Spanned<String>, Spanned<String>>,
    /// Environment variables visible to the guest through WASI.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// `spin build` settings; the host does not build, it only accepts the table.
    #[serde(default)]
    pub build: Option<BuildDef>,
    /// Settings of tools and plugins, which Spin ignores (`Component::tool` in the same file as
    /// [`Application::tool`]); accepted, not read.
    #[serde(default)]
    pub tool: BTreeMap<String, toml::Table>,
}

/// `[component.<id>.build]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildDef {
    /// The build command.
    pub command: String,
    /// Working directory of the command.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Files `spin watch` follows.
    #[serde(default)]
    pub watch: Vec<String>,
}

/// A parsed manifest together with its text, for turning spans into line numbers.
pub struct ManifestFile {
    /// Where it was read from.
    pub path: PathBuf,
    text: String,
    /// The content.
    pub manifest: Manifest,
}

impl ManifestFile {
    /// Reads and parses `path`. Syntax and unknown-key errors name the line.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
            path: path.to_owned(),
            line: 0,
            message: format!("cannot read manifest: {e}"),
        })?;
        Self::parse(path, text)
    }

    /// Parses manifest text; `path` is only used in messages and to resolve sources.
    pub fn parse(path: &Path, text: String) -> Result<Self, ManifestError> {
        let manifest: Manifest = toml::from_str(&text).map_err(|e| ManifestError {
            path: path.to_owned(),
            line: e.span().map_or(0, |s| line_of(&text, s.start)),
            message: e.message().to_owned(),
        })?;
        let file = ManifestFile {
            path: path.to_owned(),
            text,
            manifest,
        };
        if *file.manifest.spin_manifest_version.get_ref() != 2 {
            return Err(file.error_at(
                &file.manifest.spin_manifest_version,
                "only spin_manifest_version = 2 is supported",
            ));
        }
        Ok(file)
    }

    /// An error pointing at a spanned value of this manifest.
    pub fn error_at<T>(&self, at: &Spanned<T>, message: impl Into<String>) -> ManifestError {
        ManifestError {
            path: self.path.clone(),
            line: line_of(&self.text, at.span().start),
            message: message.into(),
        }
    }

    /// The folder that relative `source` paths start from.
    pub fn base_dir(&self) -> PathBuf {
        self.path.parent().map(Path::to_owned).unwrap_or_default()
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ManifestFile, ManifestError> {
        ManifestFile::parse(Path::new("spin.toml"), text.to_owned())
    }

    const MINIMAL: &str = r#"spin_manifest_version = 2
[application]
name = "app"
[[trigger.http]]
route = "/a/..."
component = "a"
[component.a]
source = "a.wasm"
"#;

    #[test]
    fn parses_a_minimal_manifest() {
        let file = parse(MINIMAL).unwrap();
        assert_eq!(file.manifest.trigger.http.len(), 1);
        assert_eq!(file.manifest.trigger.http[0].route.get_ref(), "/a/...");
    }

    #[test]
    fn unknown_trigger_type_names_its_line() {
        let text = format!("{MINIMAL}[[trigger.redis]]\nchannel = \"x\"\ncomponent = \"a\"\n");
        let err = parse(&text).err().unwrap();
        assert!(err.to_string().contains("unknown field `redis`"), "{err}");
        assert_eq!(err.line, 9, "{err}");
    }

    #[test]
    fn unsupported_component_key_names_its_line() {
        let text = format!("{MINIMAL}files = [\"static/**\"]\n");
        let err = parse(&text).err().unwrap();
        assert!(err.to_string().contains("unknown field `files`"), "{err}");
        assert_eq!(err.line, 9);
    }

    #[test]
    fn wrong_manifest_version_is_refused() {
        let err = parse(&MINIMAL.replace("= 2", "= 1")).err().unwrap();
        assert_eq!(err.line, 1);
    }
}
