# Every HTTP route's request class, read from the manifest's text: the table
# [application.tool.seckill.request_classes] (real Spin ignores `tool` tables: spin v3.6.3
# crates/manifest/src/schema/v2.rs, `AppDetails::tool`), one entry per [[trigger.http]] route.
# An entry is a class, or an inline table by method with "*" for the other methods; HEAD falls
# back to GET when the table names GET and not HEAD (as host/src/trigger/classes.rs reads it).
# Classes, most protected first: critical, sale, entry, read.
#
# The roots use it to give the critical (route, method) pairs capacity of their own: the path
# patterns a load balancer or gateway matches for each route are derived here, once:
#   ALB path patterns (globs: `*` any characters, `/` included): a `:param` segment is `*`; a
#     trailing `/...` (or `/*`) is the prefix and its subpaths (`/shop/...` -> `/shop`,
#     `/shop/*`; `/admin/events/:id/...` -> `/admin/events/*`, which covers both);
#   regular expressions (RE2, anchored): `:param` is `[^/]+`, a trailing `/...` is `(/.*)?`;
#   Gateway API path matches: Exact for a plain route, PathPrefix for a trailing wildcard (Gateway
#     API prefixes match whole path elements, as Spin's `/...` does), RegularExpression (the
#     anchored expression) for a route with a `:param` segment.
# The ALB patterns of a route with a `:param` are wider than Spin's router (`*` spans `/`): a
# request only the wider pattern matches reaches no route in Spin (404, answered before any
# instance).
#
# Read with regular expressions, like modules/spin-runtime-config reads [variables]: table
# headers start a line; the class table's entries are `"<route>" = "<class>"` or
# `"<route>" = { GET = "<class>", "*" = "<class>" }`, one to a line. A route without a class, a
# class for no route, an unknown class, a by-method table without "*" or a line of the table this
# reader cannot read fails every output's precondition, so a plan (and `terraform test`) fails.
#
# Provider-free.

locals {
  classes_order = ["critical", "sale", "entry", "read"]
  table_name    = "application.tool.seckill.request_classes"
  # The methods Gateway API's HTTPRouteMatch accepts (HTTPMethod).
  gateway_methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]

  # One chunk per table: every header moved to the start of its line, then the text split there.
  # A chunk is the header without its first "[" (so an array of tables starts with "["), a newline
  # and the table's body.
  text        = replace(replace(var.manifest, "\r\n", "\n"), "/\\n[ \\t]+\\[/", "\n[")
  split_text  = split("\n[", "\n${local.text}")
  chunk_texts = slice(local.split_text, 1, length(local.split_text))
  chunks = [for c in local.chunk_texts : {
    array = startswith(c, "[")
    name  = try(regex("^\\[?[ \\t]*([^\\]]*?)[ \\t]*\\]", c)[0], "")
    body  = join("\n", slice(split("\n", c), 1, length(split("\n", c))))
  }]

  # The HTTP routes, in the manifest's order (a private route, `route = { private = true }`, has
  # no path and no class).
  routes = [for r in [
    for c in local.chunks : try(regex("(?m)^[ \\t]*route[ \\t]*=[ \\t]*\"([^\"]*)\"", c.body)[0], null)
    if c.array && c.name == "trigger.http"
  ] : r if r != null]

  # The class table: its lines but blank ones and comments.
  table_chunks = [for c in local.chunks : c if !c.array && c.name == local.table_name]
  table_lines  = [for l in split("\n", try(local.table_chunks[0].body, "")) : trimspace(l) if trimspace(l) != "" && !startswith(trimspace(l), "#")]
  entry_re     = "^\"([^\"\\\\]*)\"[ \\t]*=[ \\t]*(.*)$"
  lines = [for l in local.table_lines : {
    line  = l
    route = try(regex(local.entry_re, l)[0], null)
    value = try(trimspace(regex(local.entry_re, l)[1]), "")
  }]
  # route => its values (more than one: named twice).
  entries_raw = { for e in local.lines : e.route => e.value... if e.route != null }
  entries = { for r, vs in local.entries_raw : r => {
    one   = try(regex("^\"([^\"]*)\"[ \\t]*(?:#.*)?$", vs[0])[0], null)
    inner = try(regex("^\\{(.*)\\}[ \\t]*(?:#.*)?$", vs[0])[0], null)
  } }
  # An inline table by method: `METHOD = "class"` or `"*" = "class"` pairs, separated by commas.
  by_method = { for r, e in local.entries : r => e.inner == null ? null : {
    pairs = [for p in regexall("(?:\"([^\"]*)\"|([A-Za-z0-9_-]+))[ \\t]*=[ \\t]*\"([^\"]*)\"", e.inner) : {
      method = coalesce(p[0], p[1])
      class  = p[2]
    }]
    equals = length(regexall("=", e.inner))
  } }
  # route => method => its classes (more than one: named twice).
  named = { for r, m in local.by_method : r => m == null ? {} : { for p in m.pairs : p.method => p.class... } }

  problems = concat(
    length(local.table_chunks) == 1 ? [] : ["the manifest has ${length(local.table_chunks)} [${local.table_name}] tables, not one: every HTTP route needs a request class there"],
    [for e in local.lines : "a line of [${local.table_name}] that is not `\"<route>\" = \"<class>\"` or `\"<route>\" = { METHOD = \"<class>\", \"*\" = \"<class>\" }`: ${e.line}" if e.route == null],
    [for r, vs in local.entries_raw : "route ${r} is given a class ${length(vs)} times" if length(vs) > 1],
    [for r in local.routes : "route ${r} has no request class in [${local.table_name}]" if !contains(keys(local.entries_raw), r)],
    [for r in keys(local.entries_raw) : "[${local.table_name}] names ${r}, which no [[trigger.http]] route is" if !contains(local.routes, r)],
    [for r, e in local.entries : "route ${r}: ${local.entries_raw[r][0]} is neither a class nor an inline table by method" if e.one == null && e.inner == null],
    [for r, m in local.by_method : "route ${r}: an inline table this module cannot read (pairs of METHOD = \"class\" or \"*\" = \"class\")" if m != null && length(try(m.pairs, [])) != try(m.equals, 0)],
    [for r, m in local.by_method : "route ${r}: a class by method needs \"*\" for the other methods" if m != null && !contains(keys(local.named[r]), "*")],
    flatten([for r, ms in local.named : [for m, cs in ms : "route ${r}: method ${m} is given a class ${length(cs)} times" if length(cs) > 1]]),
    flatten([for r, ms in local.named : [for m, cs in ms : "route ${r}: ${m} is not a method (GET, POST, ...) or \"*\"" if m != "*" && !can(regex("^[A-Z]+$", m))]]),
    flatten([for r, ms in local.named : [for m, cs in ms : "route ${r}: ${m} has the unknown class ${cs[0]} (one of ${join(", ", local.classes_order)})" if !contains(local.classes_order, cs[0])]]),
    [for r, e in local.entries : "route ${r}: the unknown class ${e.one} (one of ${join(", ", local.classes_order)})" if e.one != null && !contains(local.classes_order, coalesce(e.one, "-"))],
  )

  # route => method => class, "*" for the methods not named; HEAD added where GET is named and
  # HEAD is not (HEAD falls back to GET). A route with no class reads "*" = "none" (a problem).
  classes = { for r in local.routes : r => merge(
    { for m, cs in lookup(local.named, r, {}) : m => cs[0] if m != "*" },
    contains(keys(lookup(local.named, r, {})), "GET") && !contains(keys(lookup(local.named, r, {})), "HEAD") ? { HEAD = local.named[r]["GET"][0] } : {},
    { "*" = try(local.entries[r].one != null ? local.entries[r].one : local.named[r]["*"][0], "none") },
  ) }

  # --- Paths: what a load balancer or a gateway matches for each route -------------------------

  shapes = { for r in local.routes : r => {
    wildcard = endswith(r, "/...") || endswith(r, "/*")
    segments = split("/", endswith(r, "/...") ? trimsuffix(r, "/...") : (endswith(r, "/*") ? trimsuffix(r, "/*") : r))
  } }
  bases = { for r, s in local.shapes : r => {
    param  = anytrue([for g in s.segments : startswith(g, ":")])
    glob   = join("/", [for g in s.segments : startswith(g, ":") ? "*" : g])
    regex  = join("/", [for g in s.segments : startswith(g, ":") ? "[^/]+" : replace(g, "/([.+*?()|{}^$\\[\\]\\\\])/", "\\$1")])
    sample = join("/", [for g in s.segments : startswith(g, ":") ? "${trimprefix(g, ":")}1" : g])
  } }

  alb_path_patterns = { for r, b in local.bases : r => (
    !local.shapes[r].wildcard ? [b.glob] :
    b.glob == "" ? ["/*"] :
    endswith(b.glob, "*") ? [b.glob] : [b.glob, "${b.glob}/*"]
  ) }
  path_regexes  = { for r, b in local.bases : r => local.shapes[r].wildcard ? "^${b.regex}(/.*)?$" : "^${b.regex}$" }
  gateway_paths = { for r, b in local.bases : r => b.param ? { type = "RegularExpression", value = local.path_regexes[r] } : (local.shapes[r].wildcard ? { type = "PathPrefix", value = b.glob == "" ? "/" : b.glob } : { type = "Exact", value = b.glob }) }
  # Paths each route serves (a `:param` filled in; a wildcard route's prefix and a subpath): for
  # checks that send every route's requests through the rules built from these patterns.
  sample_paths = { for r, b in local.bases : r => local.shapes[r].wildcard ? [b.sample == "" ? "/" : b.sample, "${b.sample}/x/y"] : [b.sample] }

  # --- The critical pairs ----------------------------------------------------------------------

  critical_pairs = flatten([for r in local.routes : [for m, c in local.classes[r] : { route = r, method = m } if c == "critical"]])
  # Per route with a critical pair: `methods`, the methods sent to the critical capacity (empty:
  # every method, "*" being critical), and `except_methods`, the methods of such a route that
  # stay with the main capacity (named with a lower class).
  critical_routes = [for r in local.routes : {
    route             = r
    methods           = local.classes[r]["*"] == "critical" ? [] : sort([for m, c in local.classes[r] : m if m != "*" && c == "critical"])
    except_methods    = local.classes[r]["*"] == "critical" ? sort([for m, c in local.classes[r] : m if m != "*" && c != "critical"]) : []
    alb_path_patterns = local.alb_path_patterns[r]
    path_regex        = local.path_regexes[r]
    gateway_path      = local.gateway_paths[r]
  } if contains(values(local.classes[r]), "critical")]

  # Gateway API HTTPRouteMatch lists: the critical pairs (to the critical capacity), and the
  # named lower-class methods of a route whose other methods are critical (to the main capacity:
  # a match with a method outranks the same path without one).
  gateway_critical_matches = flatten([for c in local.critical_routes : concat(
    [for x in(length(c.methods) == 0 ? [true] : []) : { path = c.gateway_path }],
    [for m in c.methods : { path = c.gateway_path, method = m }],
  )])
  gateway_main_matches = flatten([for c in local.critical_routes : [for m in c.except_methods : { path = c.gateway_path, method = m }]])
  gateway_problems = [for m in distinct(flatten([for c in local.critical_routes : concat(c.methods, c.except_methods)])) :
  "method ${m} cannot be matched by a Gateway API HTTPRoute (${join(", ", local.gateway_methods)})" if !contains(local.gateway_methods, m)]
}
