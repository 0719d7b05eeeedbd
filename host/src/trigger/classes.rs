//! Request classes: how much each route matters when there is not room for every request.
//!
//! The app declares them once, in its manifest's `[application.tool.seckill.request_classes]`
//! (real Spin ignores `tool` tables: spin v3.6.3 `crates/manifest/src/schema/v2.rs`,
//! `AppDetails::tool` and `Component::tool`), where this host and the deploy roots
//! (`infra/terraform/modules/request-classes`) both read them. A route takes one class, or one
//! per method with `"*"` for the others; `HEAD` falls back to `GET`. The classes follow the
//! criticality levels of Google's SRE book ("Handling Overload"): the lowest is shed first and a
//! critical request is never shed while a lower class is served ([`crate::runtime::overload`]).

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;
use http::Method;
use serde::Deserialize;

use crate::manifest::{ManifestError, ManifestFile};
use crate::runtime::overload::Class;
use crate::trigger::routes::Router;

/// One route's entry as written: a class, or classes by method.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Entry {
    One(Class),
    ByMethod(HashMap<String, Class>),
}

/// One route's classes.
#[derive(Debug, Clone)]
pub struct RouteClass {
    by_method: Vec<(Method, Class)>,
    other: Class,
}

impl RouteClass {
    fn one(class: Class) -> Self {
        RouteClass {
            by_method: Vec::new(),
            other: class,
        }
    }

    fn of_entry(entry: Entry) -> Result<Self, String> {
        let by_method = match entry {
            Entry::One(class) => return Ok(RouteClass::one(class)),
            Entry::ByMethod(by_method) => by_method,
        };
        let mut route = RouteClass {
            by_method: Vec::new(),
            other: *by_method
                .get("*")
                .ok_or("a class by method needs \"*\" for the other methods")?,
        };
        for (name, class) in by_method {
            if name == "*" {
                continue;
            }
            if name.is_empty() || name.bytes().any(|b| !b.is_ascii_uppercase()) {
                return Err(format!("`{name}` is not a method (GET, POST, …) or \"*\""));
            }
            let method = Method::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
            route.by_method.push((method, class));
        }
        Ok(route)
    }

    /// The class of a request with `method`.
    pub fn of(&self, method: &Method) -> Class {
        let named = |m: &Method| {
            self.by_method
                .iter()
                .find_map(|(name, class)| (name == m).then_some(*class))
        };
        named(method)
            .or_else(|| {
                (method == Method::HEAD)
                    .then(|| named(&Method::GET))
                    .flatten()
            })
            .unwrap_or(self.other)
    }
}

/// The `seckill` tool table of the manifest, as far as this host reads it: read once at load.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolTable {
    /// Each route's request class (this module).
    #[serde(default)]
    request_classes: Option<HashMap<String, Entry>>,
    /// Request bodies taken by route above the host's default (`http_trigger`).
    #[serde(default)]
    pub(crate) request_body_limits: HashMap<String, u64>,
}

impl ToolTable {
    /// `[application.tool.seckill]` of `file` (empty when it has none).
    pub(crate) fn of(file: &ManifestFile) -> Result<ToolTable, ManifestError> {
        let Some(tool) = file.manifest.application.tool.get("seckill") else {
            return Ok(ToolTable::default());
        };
        toml::Value::Table(tool.clone())
            .try_into()
            .map_err(|e| ManifestError {
                path: file.path.clone(),
                line: 0,
                message: format!("[application.tool.seckill]: {e}"),
            })
    }

    /// The routes' own body limits; each must name a route.
    pub(crate) fn body_limits(
        &self,
        file: &ManifestFile,
    ) -> Result<HashMap<String, u64>, ManifestError> {
        names_only_routes(file, "request_body_limits", self.request_body_limits.keys())?;
        Ok(self.request_body_limits.clone())
    }
}

/// Refuses an entry of the tool table `table` that names no `[[trigger.http]]` route (a typo, or
/// a route since removed, would otherwise be ignored).
fn names_only_routes<'a>(
    file: &ManifestFile,
    table: &str,
    names: impl Iterator<Item = &'a String>,
) -> Result<(), ManifestError> {
    let routed = |name: &&String| {
        file.manifest
            .trigger
            .http
            .iter()
            .any(|t| t.route.get_ref() == *name)
    };
    match names.filter(|n| !routed(n)).min() {
        None => Ok(()),
        Some(stray) => Err(ManifestError {
            path: file.path.clone(),
            line: 0,
            message: format!(
                "[application.tool.seckill.{table}] names `{stray}`, which no [[trigger.http]] route is"
            ),
        }),
    }
}

/// Every HTTP route's classes, by the route as written in the manifest.
#[derive(Debug, Clone)]
pub struct RequestClasses(HashMap<String, RouteClass>);

impl RequestClasses {
    /// The classes of every `[[trigger.http]]` route of `file`: each route must have one and
    /// each entry must name a route, so a route added without a class stops the app at load.
    /// A manifest without the table (an app that is not seckill) serves every route as
    /// [`Class::UNDECLARED`].
    pub fn of_manifest(file: &ManifestFile) -> Result<RequestClasses, ManifestError> {
        Self::of_tool(file, ToolTable::of(file)?)
    }

    /// [`Self::of_manifest`], from the tool table the trigger read once.
    pub(crate) fn of_tool(
        file: &ManifestFile,
        tool: ToolTable,
    ) -> Result<RequestClasses, ManifestError> {
        let error = |message: String| ManifestError {
            path: file.path.clone(),
            line: 0,
            message,
        };
        let routes = file.manifest.trigger.http.iter().map(|t| &t.route);
        let Some(mut table) = tool.request_classes else {
            let undeclared = RouteClass::one(Class::UNDECLARED);
            return Ok(RequestClasses(
                routes
                    .map(|r| (r.get_ref().clone(), undeclared.clone()))
                    .collect(),
            ));
        };
        let mut classes = HashMap::new();
        for route in routes {
            let Some(entry) = table.remove(route.get_ref()) else {
                return Err(file.error_at(
                    route,
                    format!(
                        "route `{}` has no request class in [application.tool.seckill.request_classes]",
                        route.get_ref()
                    ),
                ));
            };
            let class = RouteClass::of_entry(entry).map_err(|e| {
                error(format!(
                    "[application.tool.seckill.request_classes] `{}`: {e}",
                    route.get_ref()
                ))
            })?;
            classes.insert(route.get_ref().clone(), class);
        }
        names_only_routes(file, "request_classes", table.keys())?;
        Ok(RequestClasses(classes))
    }

    /// The classes of the route written `raw_route` in the manifest.
    pub fn route(&self, raw_route: &str) -> Option<&RouteClass> {
        self.0.get(raw_route)
    }
}

/// The class of a request as the host gives it, from a manifest alone: for a load generator
/// or a report that sorts what it sent by class.
pub struct Classifier {
    router: Router,
    routes: Vec<String>,
    classes: RequestClasses,
}

impl Classifier {
    /// Reads the manifest at `path`.
    pub fn load(path: &Path) -> Result<Classifier> {
        let file = ManifestFile::load(path)?;
        let classes = RequestClasses::of_manifest(&file)?;
        let routes: Vec<String> = file
            .manifest
            .trigger
            .http
            .iter()
            .map(|t| t.route.get_ref().clone())
            .collect();
        let (router, _) = Router::build(routes.iter().enumerate().map(|(i, r)| (r.as_str(), i)))
            .map_err(anyhow::Error::msg)?;
        Ok(Classifier {
            router,
            routes,
            classes,
        })
    }

    /// The class of `method` on `path` (no query), or `None` where no route matches.
    pub fn classify(&self, method: &Method, path: &str) -> Option<Class> {
        let matched = self.router.route(path)?;
        let route = &self.routes[matched.component];
        Some(self.classes.route(route)?.of(method))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(table: &str) -> Result<RequestClasses, ManifestError> {
        let text = format!(
            r#"spin_manifest_version = 2
[application]
name = "app"
{table}
[[trigger.http]]
route = "/a/..."
component = "a"
[[trigger.http]]
route = "/b/:id"
component = "a"
[component.a]
source = "a.wasm"
"#
        );
        let file = ManifestFile::parse(Path::new("spin.toml"), text)?;
        RequestClasses::of_manifest(&file)
    }

    const TABLE: &str = r#"[application.tool.seckill.request_classes]
"/a/..." = "read"
"/b/:id" = { GET = "sale", "*" = "critical" }"#;

    #[test]
    fn a_route_takes_its_class_and_a_method_its_own() {
        let classes = manifest(TABLE).unwrap();
        assert_eq!(
            classes.route("/a/...").unwrap().of(&Method::POST),
            Class::Read
        );
        let b = classes.route("/b/:id").unwrap();
        assert_eq!(b.of(&Method::GET), Class::Sale);
        assert_eq!(b.of(&Method::HEAD), Class::Sale, "HEAD falls back to GET");
        assert_eq!(b.of(&Method::PUT), Class::Critical);
        assert_eq!(b.of(&Method::DELETE), Class::Critical);
    }

    #[test]
    fn a_route_without_a_class_stops_the_load_at_its_line() {
        let err = manifest(&TABLE.replace("\"/a/...\" = \"read\"\n", "")).unwrap_err();
        assert!(
            err.message.contains("`/a/...` has no request class"),
            "{err}"
        );
        assert_eq!(err.line, 7, "{err}");
    }

    #[test]
    fn an_entry_that_names_no_route_stops_the_load() {
        let err = manifest(&format!("{TABLE}\n\"/c\" = \"read\"")).unwrap_err();
        assert!(err.message.contains("names `/c`"), "{err}");
    }

    #[test]
    fn a_body_limit_that_names_no_route_stops_the_load() {
        let limits = "[application.tool.seckill.request_body_limits]";
        let file = |table: String| {
            let text = format!(
                "spin_manifest_version = 2\n[application]\nname = \"app\"\n{table}\n[[trigger.http]]\nroute = \"/a/...\"\ncomponent = \"a\"\n[component.a]\nsource = \"a.wasm\"\n"
            );
            ManifestFile::parse(Path::new("spin.toml"), text).unwrap()
        };
        let good = file(format!("{limits}\n\"/a/...\" = 262144"));
        let limits_of = |f: &ManifestFile| ToolTable::of(f).and_then(|t| t.body_limits(f));
        assert_eq!(limits_of(&good).unwrap()["/a/..."], 262_144);
        let stray = file(format!("{limits}\n\"/b\" = 262144"));
        let err = limits_of(&stray).unwrap_err();
        assert!(
            err.message.contains("request_body_limits] names `/b`"),
            "{err}"
        );
    }

    #[test]
    fn a_class_by_method_must_cover_every_method_and_name_real_ones() {
        let err = manifest(&TABLE.replace(", \"*\" = \"critical\"", "")).unwrap_err();
        assert!(err.message.contains("needs \"*\""), "{err}");
        let err = manifest(&TABLE.replace("GET", "get")).unwrap_err();
        assert!(err.message.contains("`get` is not a method"), "{err}");
        let err = manifest(&TABLE.replace("\"read\"", "\"urgent\"")).unwrap_err();
        assert!(err.message.contains("request_classes"), "{err}");
    }

    #[test]
    fn an_app_without_the_table_serves_every_route_alike() {
        let classes = manifest("").unwrap();
        assert_eq!(
            classes.route("/b/:id").unwrap().of(&Method::PUT),
            Class::UNDECLARED
        );
    }

    #[test]
    fn every_route_of_both_manifests_has_a_class() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for name in ["spin.toml", "spin.http.toml"] {
            let path = root.join(name);
            let file = ManifestFile::load(&path).unwrap();
            assert!(
                file.manifest.application.tool.contains_key("seckill"),
                "{name} declares its classes"
            );
            let classes = RequestClasses::of_manifest(&file).unwrap();
            let classifier = Classifier::load(&path).unwrap();
            let webhook = classifier.classify(&Method::POST, "/api/payments/webhook");
            assert_eq!(webhook, Some(Class::Critical), "{name}");
            let drain = classifier.classify(&Method::POST, "/admin/jobs/drain");
            assert_eq!(drain, Some(Class::Critical), "{name}");
            let buy = classifier.classify(&Method::POST, "/api/events/e/buy");
            assert_eq!(buy, Some(Class::Sale), "{name}");
            let poll = classifier.classify(&Method::GET, "/api/events/e/orders/me");
            assert_eq!(poll, Some(Class::Read), "{name}");
            let write = classifier.classify(&Method::PUT, "/admin/events/e");
            assert_eq!(write, Some(Class::Critical), "{name}");
            let read = classifier.classify(&Method::GET, "/admin/events/e");
            assert_eq!(read, Some(Class::Sale), "{name}");
            for t in &file.manifest.trigger.http {
                assert!(classes.route(t.route.get_ref()).is_some());
            }
        }
    }
}
