//! HTTP routes as Spin matches them: exact segments, `:name` captures, a trailing `/...` wildcard.
//! The most specific route wins: exact over wildcard, then more literal segments, then more
//! segments. Two routes that would always tie are a startup error, as in Spin.

/// One `[[trigger.http]]` route, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutePattern {
    raw: String,
    segments: Vec<Segment>,
    wildcard: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Capture(String),
}

/// A successful match of a request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    /// The route as written in the manifest (`/a/:id/...`): `spin-raw-component-route`.
    pub raw_route: String,
    /// The route without its `/...` wildcard: `spin-component-route`.
    pub component_route: String,
    /// The matched route with the base path (`/` here): `spin-matched-route`.
    pub matched_route: String,
    /// The rest of the path after the component route: `spin-path-info`.
    pub path_info: String,
    /// `:name` captures in order: `spin-path-match-<name>`.
    pub captures: Vec<(String, String)>,
}

impl RoutePattern {
    /// Parses `/exact`, `/with/:param`, `/prefix/...`, `/...`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        if !raw.starts_with('/') {
            return Err(format!("route {raw:?} must start with `/`"));
        }
        let (body, wildcard) = match raw.strip_suffix("/...") {
            Some(body) => (body, true),
            None if raw.ends_with("...") => {
                return Err(format!(
                    "route {raw:?}: `...` is only allowed as a last segment"
                ));
            }
            None => (raw, false),
        };
        let mut segments = Vec::new();
        for seg in body.split('/').filter(|s| !s.is_empty()) {
            if let Some(name) = seg.strip_prefix(':') {
                if name.is_empty() {
                    return Err(format!("route {raw:?}: empty `:` capture"));
                }
                segments.push(Segment::Capture(name.to_owned()));
            } else if seg == "..." {
                return Err(format!(
                    "route {raw:?}: `...` is only allowed as a last segment"
                ));
            } else {
                segments.push(Segment::Literal(seg.to_owned()));
            }
        }
        Ok(RoutePattern {
            raw: raw.to_owned(),
            segments,
            wildcard,
        })
    }

    /// The route as written.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Higher is more specific.
    fn specificity(&self) -> (bool, usize, usize) {
        let literals = self
            .segments
            .iter()
            .filter(|s| matches!(s, Segment::Literal(_)))
            .count();
        (!self.wildcard, literals, self.segments.len())
    }

    /// Matches a request path (no query string).
    pub fn matches(&self, path: &str) -> Option<RouteMatch> {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if parts.len() < self.segments.len()
            || (!self.wildcard && parts.len() != self.segments.len())
        {
            return None;
        }
        let mut captures = Vec::new();
        for (seg, part) in self.segments.iter().zip(&parts) {
            match seg {
                Segment::Literal(l) if l == part => {}
                Segment::Literal(_) => return None,
                Segment::Capture(name) => captures.push((name.clone(), (*part).to_owned())),
            }
        }
        let component_route = self.raw.strip_suffix("/...").unwrap_or(&self.raw);
        let component_route = if component_route.is_empty() {
            ""
        } else {
            component_route
        };
        let rest = &parts[self.segments.len()..];
        let path_info = if rest.is_empty() {
            if self.wildcard && path.ends_with('/') && !self.segments.is_empty() {
                "/".into()
            } else {
                String::new()
            }
        } else {
            format!(
                "/{}{}",
                rest.join("/"),
                if path.ends_with('/') { "/" } else { "" }
            )
        };
        Some(RouteMatch {
            raw_route: self.raw.clone(),
            component_route: component_route.to_owned(),
            matched_route: self.raw.clone(),
            path_info,
            captures,
        })
    }
}

/// All routes of the app, each pointing at a component (by index into the host's components).
#[derive(Debug, Default)]
pub struct Router {
    routes: Vec<(RoutePattern, usize)>,
}

impl Router {
    /// Adds a route; a route that duplicates an existing one is an error.
    pub fn add(&mut self, pattern: RoutePattern, component: usize) -> Result<(), String> {
        if let Some((dup, _)) = self.routes.iter().find(|(p, _)| same_shape(p, &pattern)) {
            return Err(format!(
                "route {:?} duplicates route {:?}",
                pattern.raw, dup.raw
            ));
        }
        self.routes.push((pattern, component));
        self.routes
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.specificity()));
        Ok(())
    }

    /// The most specific route matching `path`.
    pub fn route(&self, path: &str) -> Option<(usize, RouteMatch)> {
        self.routes
            .iter()
            .find_map(|(p, c)| p.matches(path).map(|m| (*c, m)))
    }
}

fn same_shape(a: &RoutePattern, b: &RoutePattern) -> bool {
    a.wildcard == b.wildcard
        && a.segments.len() == b.segments.len()
        && a.segments
            .iter()
            .zip(&b.segments)
            .all(|(x, y)| match (x, y) {
                (Segment::Literal(x), Segment::Literal(y)) => x == y,
                (Segment::Capture(_), Segment::Capture(_)) => true,
                _ => false,
            })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(routes: &[&str]) -> Router {
        let mut r = Router::default();
        for (i, route) in routes.iter().enumerate() {
            r.add(RoutePattern::parse(route).unwrap(), i).unwrap();
        }
        r
    }

    #[test]
    fn exact_beats_capture_beats_wildcard() {
        let r = router(&["/...", "/api/...", "/api/events/:id", "/api/events/new"]);
        assert_eq!(r.route("/api/events/new").unwrap().0, 3);
        assert_eq!(r.route("/api/events/42").unwrap().0, 2);
        assert_eq!(r.route("/api/events/42/x").unwrap().0, 1);
        assert_eq!(r.route("/other").unwrap().0, 0);
    }

    #[test]
    fn captures_and_path_info() {
        let r = router(&["/api/events/:event_id/..."]);
        let (_, m) = r.route("/api/events/e1/buy").unwrap();
        assert_eq!(m.captures, vec![("event_id".into(), "e1".into())]);
        assert_eq!(m.path_info, "/buy");
        assert_eq!(m.component_route, "/api/events/:event_id");
        assert_eq!(m.raw_route, "/api/events/:event_id/...");
        assert!(r.route("/api/events").is_none());
    }

    #[test]
    fn exact_routes_do_not_match_longer_paths() {
        let r = router(&["/api/time"]);
        assert!(r.route("/api/time").is_some());
        assert!(r.route("/api/time/x").is_none());
        assert_eq!(r.route("/api/time").unwrap().1.path_info, "");
    }

    #[test]
    fn duplicates_and_bad_routes_are_errors() {
        let mut r = router(&["/a/:x"]);
        assert!(r.add(RoutePattern::parse("/a/:y").unwrap(), 9).is_err());
        assert!(RoutePattern::parse("a").is_err());
        assert!(RoutePattern::parse("/a/.../b").is_err());
    }
}
