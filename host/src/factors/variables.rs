//! The variables factor: `fermyon:spin/variables@2.0.0` (Spin's `crates/factor-variables`).
//! Component variables are templates over application variables ([`crate::manifest::expressions`]);
//! this factor owns them: its `configure_app` checks and resolves every component's once at
//! startup, as Spin's builds its expression resolver from the app's components there, so a
//! `get` is a map lookup (what Spin would pay instead is counted: `spin_costs`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use crate::factors::component::ComponentConfig;
use crate::factors::spin_costs::InstanceMeter;
use crate::factors::{ConfigureAppContext, Factor, PrepareContext};
use crate::manifest::ManifestError;
use crate::manifest::expressions::{self, check_name};

/// A component's resolved variables (name → value).
pub type ComponentVariables = BTreeMap<String, String>;
use bindings::fermyon::spin::variables::{self, Error};

/// Host bindings of the interface, generated here so that this module is the whole factor.
mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package seckill:variables-factor;
            world variables { import fermyon:spin/variables@2.0.0; }
        ",
        path: "../wit/deps/spin@2.0.0",
        imports: { default: async },
    });
}

/// One instance's view of its component's variables.
pub struct InstanceState {
    component: Arc<ComponentConfig>,
    variables: Arc<ComponentVariables>,
    /// What Spin would pay for this instance: Spin resolves on every `get`.
    meter: Arc<InstanceMeter>,
}

impl Factor for InstanceState {
    /// The application variables' providers are the app loader's (they resolve the manifest's
    /// `[variables]` before any factor starts); nothing else is configured here.
    type RuntimeConfig = ();
    /// Each component's variables, by component id.
    type AppState = HashMap<String, Arc<ComponentVariables>>;

    /// Every component's `[component.<id>.variables]`: each name checked, each template
    /// expanded over the application variables; the first fault names its manifest line.
    fn configure_app(
        (): (),
        app: &ConfigureAppContext<'_>,
    ) -> Result<Self::AppState, ManifestError> {
        let file = app.file;
        let mut all = HashMap::new();
        for (id, def) in &file.manifest.component {
            let mut vars = ComponentVariables::new();
            for (name, template) in &def.variables {
                check_name(name.get_ref()).map_err(|e| file.error_at(name, e))?;
                let value = expressions::parse_template(template.get_ref())
                    .and_then(|parts| expressions::expand(&parts, app.app_vars))
                    .map_err(|e| file.error_at(template, e))?;
                vars.insert(name.get_ref().clone(), value);
            }
            all.insert(id.get_ref().clone(), Arc::new(vars));
        }
        Ok(all)
    }

    fn prepare(ctx: PrepareContext<'_, Self::AppState>) -> Self {
        InstanceState {
            component: ctx.component.clone(),
            variables: ctx
                .app_state
                .get(&ctx.component.id)
                .cloned()
                .unwrap_or_default(),
            meter: ctx.meter.clone(),
        }
    }

    fn add_to_linker<T: Send + 'static>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut Self,
    ) -> wasmtime::Result<()> {
        variables::add_to_linker::<T, HasSelf<InstanceState>>(linker, get)
    }
}

impl variables::Host for InstanceState {
    async fn get(&mut self, name: String) -> Result<String, Error> {
        self.meter.variable_get(&name);
        // Spin's texts: `crates/expressions/src/lib.rs` (`Key::new`, `Resolver::get_template`).
        check_name(&name).map_err(Error::InvalidName)?;
        self.variables.get(&name).cloned().ok_or_else(|| {
            Error::Undefined(format!("no variable for {:?}.{name:?}", self.component.id))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::manifest::ManifestFile;

    /// The variables factor's part of `variables` (the component's table) over the
    /// application variables `app_vars`.
    fn configure(
        variables: &str,
        app_vars: &[(&str, &str)],
    ) -> Result<Vec<(String, String)>, ManifestError> {
        let text = format!(
            "spin_manifest_version = 2\n[application]\nname = \"app\"\n[[trigger.http]]\n\
             route = \"/a/...\"\ncomponent = \"a\"\n[component.a]\nsource = \"a.wasm\"\n\
             [component.a.variables]\n{variables}"
        );
        let file = ManifestFile::parse(Path::new("spin.toml"), text)?;
        let app_vars = app_vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let ctx = ConfigureAppContext {
            file: &file,
            app_vars: &app_vars,
        };
        let state = InstanceState::configure_app((), &ctx)?;
        Ok(state["a"]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    #[test]
    fn a_components_templates_are_expanded_over_the_application_variables() {
        let vars = configure("url = \"redis://{{ host }}:6379\"\n", &[("host", "h")]).unwrap();
        assert_eq!(vars, vec![("url".to_owned(), "redis://h:6379".to_owned())]);
    }

    #[test]
    fn a_template_over_a_variable_without_value_fails_naming_its_line() {
        let err = configure("ok = \"x\"\nurl = \"{{ nowhere }}\"\n", &[]).unwrap_err();
        assert!(err.to_string().contains("`nowhere` has no value"), "{err}");
        assert_eq!(err.line, 11, "{err}");
    }

    #[test]
    fn a_variable_name_spin_refuses_fails_naming_its_line() {
        let err = configure("Bad-Name = \"x\"\n", &[]).unwrap_err();
        assert!(err.to_string().contains("invalid character"), "{err}");
        assert_eq!(err.line, 10, "{err}");
    }
}
