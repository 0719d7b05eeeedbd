//! Spin's expressions (`crates/expressions`): `{{ name }}` templates over application
//! variables, the rule for variable names, and the providers a value comes from.
//!
//! Providers, first hit wins (Spin's default runtime config): the environment
//! (`SPIN_VARIABLE_<UPPER_NAME>`), then a `.env` file beside the manifest or given on the command
//! line (same names), then the manifest's `default`. A `required` variable without a value is a
//! startup error.

use std::collections::HashMap;

use crate::manifest::{ManifestError, ManifestFile};

/// One piece of a `{{ var }}` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Literal text.
    Literal(String),
    /// `{{ name }}`: the value of an application variable.
    Variable(String),
}

/// Parses `text {{ name }} text` into parts. Unclosed braces and bad names are errors.
pub fn parse_template(template: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            parts.push(Part::Literal(rest[..open].to_owned()));
        }
        let after = &rest[open + 2..];
        let close = after
            .find("}}")
            .ok_or_else(|| format!("unclosed `{{{{` in template {template:?}"))?;
        let name = after[..close].trim();
        check_name(name).map_err(|e| format!("in template {template:?}: {e}"))?;
        parts.push(Part::Variable(name.to_owned()));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest.to_owned()));
    }
    Ok(parts)
}

/// Spin's rule for variable names (`Key::validate` in `crates/expressions/src/lib.rs`), with
/// its wording: the error text is what a guest sees in `Error::InvalidName`.
pub fn check_name(key: &str) -> Result<(), String> {
    let reason = if key.is_empty() {
        "must not be empty".to_owned()
    } else if let Some(invalid) = key
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'))
    {
        format!(
            "invalid character {invalid:?}. Variable names may contain only lower-case letters, numbers, and underscores."
        )
    } else if !key.as_bytes()[0].is_ascii_lowercase() {
        "must start with a lowercase ASCII letter".to_owned()
    } else if !key.as_bytes()[key.len() - 1].is_ascii_alphanumeric() {
        "must end with a lowercase ASCII letter or digit".to_owned()
    } else if key.contains("__") {
        "must not contain multiple consecutive underscores".to_owned()
    } else {
        return Ok(());
    };
    Err(format!("{key:?}: {reason}"))
}

/// Where values come from, besides the manifest defaults.
#[derive(Debug, Default, Clone)]
pub struct Providers {
    /// `.env` entries (already parsed), consulted after the process environment.
    pub dotenv: HashMap<String, String>,
    /// Extra `SPIN_VARIABLE_*`-style overrides, consulted before the environment (tests use this
    /// instead of mutating the process environment).
    pub overrides: HashMap<String, String>,
}

impl Providers {
    /// Reads a `.env` file; a missing file is no error.
    pub fn with_dotenv(mut self, path: &std::path::Path) -> anyhow::Result<Self> {
        if path.exists() {
            for item in dotenvy::from_path_iter(path)? {
                let (k, v) = item?;
                self.dotenv.insert(k, v);
            }
        }
        Ok(self)
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<String> {
        let key = format!("SPIN_VARIABLE_{}", name.to_ascii_uppercase());
        self.overrides
            .get(&key)
            .cloned()
            .or_else(|| std::env::var(&key).ok())
            .or_else(|| self.dotenv.get(&key).cloned())
    }
}

/// Resolves the manifest's `[variables]` with `providers` (Spin: `configure_app` in
/// `crates/factor-variables/src/lib.rs`).
pub(crate) fn resolve_manifest_variables(
    file: &ManifestFile,
    providers: &Providers,
) -> Result<HashMap<String, String>, ManifestError> {
    let m = &file.manifest;
    let values = resolve_app_variables(
        m.variables
            .iter()
            .map(|(k, d)| (k.get_ref().as_str(), d.default.as_deref(), d.required)),
        providers,
    )
    .map_err(|e| ManifestError {
        path: file.path.clone(),
        line: 0,
        message: e,
    })?;
    for (name, def) in &m.variables {
        if def.required && def.default.is_some() {
            return Err(file.error_at(
                name,
                "a variable cannot be both required and have a default",
            ));
        }
    }
    Ok(values)
}

/// Resolves every application variable: provider value, else default, else (if required) error.
/// Optional variables without a value stay absent; using one in a template is an error then.
pub fn resolve_app_variables<'a>(
    defs: impl IntoIterator<Item = (&'a str, Option<&'a str>, bool)>,
    providers: &Providers,
) -> Result<HashMap<String, String>, String> {
    let mut values = HashMap::new();
    for (name, default, required) in defs {
        check_name(name)?;
        match providers
            .lookup(name)
            .or_else(|| default.map(str::to_owned))
        {
            Some(value) => {
                values.insert(name.to_owned(), value);
            }
            None if required => {
                return Err(format!(
                    "required variable `{name}` has no value (set SPIN_VARIABLE_{})",
                    name.to_ascii_uppercase()
                ));
            }
            None => {}
        }
    }
    Ok(values)
}

/// Expands a parsed template with application variable values.
pub fn expand(parts: &[Part], app: &HashMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Literal(s) => out.push_str(s),
            Part::Variable(name) => out.push_str(
                app.get(name)
                    .ok_or_else(|| format!("variable `{name}` has no value"))?,
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_and_expand() {
        let parts = parse_template("redis://{{ host }}:{{port}}/0").unwrap();
        assert_eq!(parts.len(), 5);
        let app = HashMap::from([("host".into(), "h".into()), ("port".into(), "1".into())]);
        assert_eq!(expand(&parts, &app).unwrap(), "redis://h:1/0");
        assert!(expand(&parts, &HashMap::new()).is_err());
    }

    #[test]
    fn bad_templates_are_errors() {
        assert!(parse_template("{{ host").is_err());
        assert!(parse_template("{{ Host }}").is_err());
        assert_eq!(
            parse_template("plain").unwrap(),
            vec![Part::Literal("plain".into())]
        );
    }

    /// `keys_good` and `keys_bad` in Spin's `crates/expressions/src/lib.rs`.
    #[test]
    fn names_follow_spins_key_rules() {
        for key in ["a", "abc", "a1b2c3", "a_1", "a_1_b_3"] {
            check_name(key).expect(key);
        }
        for key in ["", "aX", "1bc", "_x", "x.y", "x_", "a__b", "x-y"] {
            check_name(key).expect_err(key);
        }
        assert_eq!(
            check_name("Bad-Name").unwrap_err(),
            r#""Bad-Name": invalid character 'B'. Variable names may contain only lower-case letters, numbers, and underscores."#
        );
    }

    #[test]
    fn providers_then_defaults_then_required() {
        let providers = Providers {
            overrides: HashMap::from([("SPIN_VARIABLE_A".into(), "from-env".into())]),
            dotenv: HashMap::from([("SPIN_VARIABLE_B".into(), "from-dotenv".into())]),
        };
        let vals = resolve_app_variables(
            [
                ("a", Some("d"), false),
                ("b", None, true),
                ("c", Some("dc"), false),
                ("zz", None, false),
            ],
            &providers,
        )
        .unwrap();
        assert_eq!(vals["a"], "from-env");
        assert_eq!(vals["b"], "from-dotenv");
        assert_eq!(vals["c"], "dc");
        assert!(!vals.contains_key("zz"));
        let err = resolve_app_variables([("needed_var", None, true)], &providers).unwrap_err();
        assert!(err.contains("SPIN_VARIABLE_NEEDED_VAR"));
    }
}
