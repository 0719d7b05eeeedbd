//! `allowed_outbound_hosts`, matched as Spin does: `scheme://host[:port]`, `*` for any scheme,
//! host or port, `*.domain` host suffixes, port ranges `a..b`, and default ports only for the
//! schemes Spin knows (`rediss://` needs an explicit port).

use std::fmt;

/// One allowed pattern, after template expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    scheme: Pattern,
    host: HostPattern,
    port: PortPattern,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Any,
    Exact(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Any,
    Suffix(String),
    Exact(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PortPattern {
    Any,
    Range(u16, u16),
}

/// The default port of a scheme, where Spin has one.
pub fn default_port(scheme: &str) -> Option<u16> {
    Some(match scheme {
        "postgres" => 5432,
        "redis" => 6379,
        "mysql" => 3306,
        "mqtt" => 1883,
        "http" => 80,
        "https" => 443,
        _ => return None,
    })
}

impl AllowedHost {
    /// Parses `scheme://host[:port]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("{text:?}: expected scheme://host[:port]"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') {
            return Err(format!("{text:?}: paths are not allowed in outbound hosts"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() => (h, Some(p)),
            _ => (rest, None),
        };
        if host.is_empty() {
            return Err(format!("{text:?}: empty host"));
        }
        let scheme_pat = if scheme == "*" {
            Pattern::Any
        } else {
            Pattern::Exact(scheme.to_ascii_lowercase())
        };
        let host_pat = if host == "*" {
            HostPattern::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            HostPattern::Suffix(format!(".{}", suffix.to_ascii_lowercase()))
        } else {
            HostPattern::Exact(host.to_ascii_lowercase())
        };
        let port_pat = match port {
            Some("*") => PortPattern::Any,
            Some(p) => match p.split_once("..") {
                Some((a, b)) => PortPattern::Range(parse_port(text, a)?, parse_port(text, b)? - 1),
                None => {
                    let p = parse_port(text, p)?;
                    PortPattern::Range(p, p)
                }
            },
            None => match &scheme_pat {
                Pattern::Exact(s) => match default_port(s) {
                    Some(p) => PortPattern::Range(p, p),
                    None => return Err(format!("{text:?}: scheme {s} has no default port")),
                },
                Pattern::Any => return Err(format!("{text:?}: `*://` needs an explicit port")),
            },
        };
        Ok(AllowedHost {
            scheme: scheme_pat,
            host: host_pat,
            port: port_pat,
        })
    }

    /// Whether `scheme://host:port` is allowed by this pattern.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        let scheme_ok = match &self.scheme {
            Pattern::Any => true,
            Pattern::Exact(s) => s.eq_ignore_ascii_case(scheme),
        };
        let host = host.to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host_ok = match &self.host {
            HostPattern::Any => true,
            HostPattern::Suffix(s) => host.ends_with(s.as_str()),
            HostPattern::Exact(h) => h.trim_start_matches('[').trim_end_matches(']') == host,
        };
        let port_ok = match self.port {
            PortPattern::Any => true,
            PortPattern::Range(a, b) => (a..=b).contains(&port),
        };
        scheme_ok && host_ok && port_ok
    }
}

fn parse_port(text: &str, p: &str) -> Result<u16, String> {
    p.parse().map_err(|_| format!("{text:?}: bad port {p:?}"))
}

/// A component's allowed outbound hosts.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts(Vec<AllowedHost>);

impl AllowedHosts {
    /// From already-expanded patterns.
    pub fn parse<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        patterns
            .into_iter()
            .map(AllowedHost::parse)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Checks a URL such as `redis://127.0.0.1:6379/0` or `postgres://u@h/db`.
    pub fn allows_url(&self, url: &str) -> bool {
        match url::Url::parse(url) {
            Ok(u) => {
                let Some(host) = u.host_str() else {
                    return false;
                };
                let Some(port) = u.port().or_else(|| default_port(u.scheme())) else {
                    return false;
                };
                self.allows(u.scheme(), host, port)
            }
            Err(_) => false,
        }
    }

    /// Checks one scheme/host/port.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.0.iter().any(|h| h.allows(scheme, host, port))
    }
}

impl fmt::Display for AllowedHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_default_ports() {
        let hosts = AllowedHosts::parse(["redis://127.0.0.1", "postgres://db:6000"]).unwrap();
        assert!(hosts.allows_url("redis://127.0.0.1/0"));
        assert!(hosts.allows_url("redis://127.0.0.1:6379"));
        assert!(!hosts.allows_url("redis://127.0.0.1:6380"));
        assert!(hosts.allows_url("postgres://u:p@db:6000/x"));
        assert!(!hosts.allows_url("postgres://u:p@db/x"));
        assert!(!hosts.allows_url("http://127.0.0.1:6379"));
    }

    #[test]
    fn wildcards() {
        let hosts = AllowedHosts::parse(["*://*.example.com:*", "https://*"]).unwrap();
        assert!(hosts.allows_url("redis://a.example.com:1"));
        assert!(!hosts.allows_url("redis://example.org:1"));
        assert!(hosts.allows_url("https://anything.test"));
        assert!(!hosts.allows_url("http://anything.test"));
    }

    #[test]
    fn rediss_needs_a_port() {
        assert!(AllowedHost::parse("rediss://cache.example.com").is_err());
        assert!(AllowedHost::parse("rediss://cache.example.com:6380").is_ok());
        assert!(AllowedHost::parse("no-scheme").is_err());
    }

    #[test]
    fn port_ranges() {
        let hosts = AllowedHosts::parse(["http://localhost:8000..8002"]).unwrap();
        assert!(hosts.allows("http", "localhost", 8001));
        assert!(!hosts.allows("http", "localhost", 8002));
    }
}
