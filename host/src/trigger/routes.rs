//! HTTP routes exactly as Spin matches them: `crates/http/src/routes.rs` at v3.6.3, over the same
//! `routefinder` crate. `/exact`, `:name` captures, a trailing `/...` (or `/*`) wildcard; an exact
//! route beats a wildcard and the longest match wins (routefinder's ranking). A route written
//! twice is no error: the later one wins and the earlier one is reported as a duplicate.

/// What a route leads to: a component and the route as written.
#[derive(Debug, Clone)]
struct Handler {
    component: usize,
    /// The route with the base (`/`) joined: Spin's `based_route`, sent as `spin-matched-route`.
    based_route: String,
    /// The route as written in the manifest.
    raw_route: String,
}

/// A route written a second time; the later one is the one that serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateRoute {
    /// The route, as written.
    pub route: String,
    /// The component that no longer gets it.
    pub replaced: usize,
    /// The component that does.
    pub effective: usize,
}

/// All routes of the app, each pointing at a component (by index into the host's components).
#[derive(Debug)]
pub struct Router {
    inner: routefinder::Router<Handler>,
}

/// A successful match of a request path: everything Spin derives from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    /// The component that serves it.
    pub component: usize,
    /// `spin-matched-route`: the route joined with the base.
    pub based_route: String,
    /// `spin-raw-component-route`: the route as written.
    pub raw_route: String,
    /// `spin-path-info`: the part of the path the trailing wildcard took.
    pub trailing_wildcard: String,
    /// `:name` captures: `spin-path-match-<name>`.
    pub captures: Vec<(String, String)>,
}

/// Spin's `WELL_KNOWN_PREFIX` (`crates/http/src/lib.rs`): paths the runtime answers itself.
pub const WELL_KNOWN_PREFIX: &str = "/.well-known/spin/";

impl Router {
    /// Builds the router from `(route, component)` pairs in manifest order, as Spin's
    /// `Router::build("/", …)` does. Returns the duplicates for the caller to report.
    pub fn build<'a>(
        routes: impl IntoIterator<Item = (&'a str, usize)>,
    ) -> Result<(Router, Vec<DuplicateRoute>), String> {
        // Spin keys an IndexMap by the raw route: a later duplicate replaces the value and keeps
        // the first one's position.
        let mut unique: Vec<Handler> = Vec::new();
        let mut duplicates = Vec::new();
        for (raw, component) in routes {
            let handler = Handler {
                component,
                based_route: sanitize_with_base("/", raw),
                raw_route: raw.to_owned(),
            };
            match unique.iter_mut().find(|h| h.raw_route == raw) {
                Some(existing) => {
                    duplicates.push(DuplicateRoute {
                        route: raw.to_owned(),
                        replaced: existing.component,
                        effective: component,
                    });
                    *existing = handler;
                }
                None => unique.push(handler),
            }
        }
        let mut inner = routefinder::Router::new();
        for handler in unique {
            let spec = routefinder_spec(&handler.based_route);
            let (route, component) = (handler.based_route.clone(), handler.component);
            inner.add(spec.as_str(), handler).map_err(|e| {
                format!("Error parsing route {route} associated with component {component}: {e}")
            })?;
        }
        Ok((Router { inner }, duplicates))
    }

    /// Whether a route lies under `/.well-known/spin/` (Spin warns: it is never reached).
    pub fn contains_reserved_route(&self) -> bool {
        self.inner
            .iter()
            .any(|(_, h)| h.based_route.starts_with(WELL_KNOWN_PREFIX))
    }

    /// The best route for `path` (no query string), or `None` (Spin answers 404).
    pub fn route(&self, path: &str) -> Option<RouteMatch> {
        let best = self.inner.best_match(path)?;
        let handler = best.handler();
        let captures = best.captures();
        let trailing_wildcard = captures
            .wildcard()
            // Spin keeps trailing slashes, which routefinder drops.
            .map(|s| match (s.is_empty(), path.ends_with('/')) {
                (true, false) => String::new(),
                (true, true) => "/".to_owned(),
                (false, false) => format!("/{s}"),
                (false, true) => format!("/{s}/"),
            })
            .unwrap_or_default();
        Some(RouteMatch {
            component: handler.component,
            based_route: handler.based_route.clone(),
            raw_route: handler.raw_route.clone(),
            trailing_wildcard,
            captures: captures
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        })
    }
}

impl RouteMatch {
    /// `spin-component-route`: the route as written, without a trailing `/...`.
    pub fn raw_route_or_prefix(&self) -> &str {
        self.raw_route
            .strip_suffix("/...")
            .unwrap_or(&self.raw_route)
    }
}

/// Checks one route as Spin's router will parse it (a route without a leading `/` is fine:
/// Spin adds it), so that a bad one is reported at its line of the manifest.
pub fn check(raw: &str) -> Result<(), String> {
    routefinder::RouteSpec::try_from(routefinder_spec(&sanitize_with_base("/", raw)).as_str())
        .map(|_| ())
}

/// Spin's `parse_route`: `/...` becomes routefinder's `/*`.
fn routefinder_spec(based_route: &str) -> String {
    match based_route.strip_suffix("/...") {
        Some(prefix) => format!("{prefix}/*"),
        None => based_route.to_owned(),
    }
}

/// Spin's `sanitize_with_base`: absolutize the path, strip one trailing slash from each part.
fn sanitize_with_base(base: &str, path: &str) -> String {
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    let strip = |s: &str| s.strip_suffix('/').unwrap_or(s).to_owned();
    format!("{}{}", strip(base), strip(&path))
}

/// Expected values are those of Spin's own tests in `crates/http/src/routes.rs`.
#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[&str]) -> Router {
        let (r, _) = Router::build(routes.iter().enumerate().map(|(i, r)| (*r, i))).unwrap();
        r
    }

    fn component(r: &Router, path: &str) -> usize {
        r.route(path)
            .unwrap_or_else(|| panic!("{path} matched nothing"))
            .component
    }

    #[test]
    fn exact_routes() {
        let r = router(&["/foo", "/foo/bar"]);
        assert_eq!(component(&r, "/foo"), 0);
        assert_eq!(component(&r, "/foo/bar"), 1);
        assert!(r.route("/foo/bar/baz").is_none());
    }

    #[test]
    fn wildcard_matches_everything_including_root_and_trailing_slash() {
        let r = router(&["/..."]);
        for path in ["/foo/bar", "/abc/", "/", "/this/should/be/captured"] {
            assert_eq!(component(&r, path), 0, "{path}");
        }
    }

    #[test]
    fn longest_wildcard_wins_regardless_of_order() {
        for routes in [
            ["/one/...", "/one/two/...", "/one/two/three/..."],
            ["/one/two/three/...", "/one/two/...", "/one/..."],
        ] {
            let r = router(&routes);
            let m = r.route("/one/two/three/four").unwrap();
            assert_eq!(m.raw_route, "/one/two/three/...");
        }
    }

    #[test]
    fn exact_beats_wildcard() {
        let r = router(&["/one", "/..."]);
        assert_eq!(component(&r, "/one"), 0);
    }

    #[test]
    fn duplicate_routes_last_one_wins() {
        let (r, dups) =
            Router::build([("/", 0), ("/foo", 1), ("/foo", 2), ("/whee/...", 3)]).unwrap();
        assert_eq!(component(&r, "/foo"), 2);
        assert_eq!(
            dups,
            vec![DuplicateRoute {
                route: "/foo".into(),
                replaced: 1,
                effective: 2
            }]
        );
    }

    #[test]
    fn trailing_wildcard_is_captured() {
        assert_eq!(
            router(&["/..."]).route("/1/2/3").unwrap().trailing_wildcard,
            "/1/2/3"
        );
        assert_eq!(
            router(&["/1/..."])
                .route("/1/2/3")
                .unwrap()
                .trailing_wildcard,
            "/2/3"
        );
    }

    #[test]
    fn trailing_wildcard_respects_trailing_slash() {
        let r = router(&["/test/..."]);
        for (path, info) in [
            ("/test", ""),
            ("/test/", "/"),
            ("/test/hello", "/hello"),
            ("/test/hello/", "/hello/"),
        ] {
            assert_eq!(r.route(path).unwrap().trailing_wildcard, info, "{path}");
        }
    }

    #[test]
    fn named_wildcards_are_captured() {
        let m = router(&["/1/:two/3"]).route("/1/2/3").unwrap();
        assert_eq!(m.captures, vec![("two".into(), "2".into())]);
        let m = router(&["/1/:two/..."]).route("/1/2/3").unwrap();
        assert_eq!(m.captures, vec![("two".into(), "2".into())]);
        // An underscore stays in the capture's name; the header name is the trigger's business.
        let m = router(&["/api/events/:event_id/..."])
            .route("/api/events/e1/buy")
            .unwrap();
        assert_eq!(m.captures, vec![("event_id".into(), "e1".into())]);
        assert_eq!(m.trailing_wildcard, "/buy");
        assert_eq!(m.raw_route_or_prefix(), "/api/events/:event_id");
    }

    /// `test_default_headers` and `…_with_named_wildcards` in `crates/trigger-http/src/headers.rs`.
    #[test]
    fn route_values_spin_sends_as_headers() {
        let m = router(&["/foo/..."]).route("/foo/bar").unwrap();
        assert_eq!(
            (m.trailing_wildcard.as_str(), m.based_route.as_str()),
            ("/bar", "/foo/...")
        );
        assert_eq!(
            (m.raw_route.as_str(), m.raw_route_or_prefix()),
            ("/foo/...", "/foo")
        );
        let m = router(&["/foo/:userid/..."]).route("/foo/42/bar").unwrap();
        assert_eq!(m.trailing_wildcard, "/bar");
        assert_eq!(m.based_route, "/foo/:userid/...");
        assert_eq!(m.raw_route_or_prefix(), "/foo/:userid");
        assert_eq!(m.captures, vec![("userid".into(), "42".into())]);
    }

    #[test]
    fn routes_are_absolutized_and_bad_captures_refused() {
        assert_eq!(component(&router(&["no-slash"]), "/no-slash"), 0);
        assert_eq!(check("/a/:"), Err("params must be named".into()));
        assert!(check("/a/:b/...").is_ok());
    }

    #[test]
    fn reserved_routes_are_reserved() {
        assert!(router(&["/.well-known/spin/..."]).contains_reserved_route());
        assert!(router(&["/.well-known/spin/fie"]).contains_reserved_route());
        assert!(!router(&["/.well-known/spindle/..."]).contains_reserved_route());
        assert!(!router(&["/.well-known/spin"]).contains_reserved_route());
    }
}
