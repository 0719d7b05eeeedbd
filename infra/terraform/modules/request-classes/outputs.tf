output "problems" {
  description = "What is wrong with the table (empty when every route has a known class): what the other outputs' preconditions report."
  value       = local.problems
}

# Every output fails its precondition when the table does not give every route a known class, so
# a root that reads any of them cannot plan with a route left out.

output "routes" {
  description = "The manifest's HTTP routes, in its order."
  value       = local.routes
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}

output "classes" {
  description = "route => method => class (critical, sale, entry or read); \"*\" is every method not named, and HEAD is listed where GET is named and HEAD is not (HEAD falls back to GET)."
  value       = local.classes
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}

output "critical_pairs" {
  description = "Every critical (route, method) pair, method \"*\" standing for the methods the route's entry does not name."
  value       = local.critical_pairs
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}

output "critical_routes" {
  description = "Each route with a critical pair: methods (the methods that are critical; empty: every method but except_methods), except_methods (the route's methods named with a lower class, when the others are critical), and the route's alb_path_patterns, path_regex and gateway_path."
  value       = local.critical_routes
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}

output "alb_path_patterns" {
  description = "route => the ALB path-pattern values that match it (`*` for a `:param` segment; the prefix and its subpaths for a trailing `/...`)."
  value       = local.alb_path_patterns
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}

output "path_regexes" {
  description = "route => an anchored RE2 expression of the paths it serves."
  value       = local.path_regexes
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}

output "gateway_paths" {
  description = "route => its Gateway API HTTPPathMatch: Exact, PathPrefix (a trailing `/...`) or RegularExpression (a `:param` segment)."
  value       = local.gateway_paths
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}

output "gateway_critical_matches" {
  description = "Gateway API HTTPRouteMatch list of every critical pair ({ path } for every method of a route, { path, method } for one): the matches of the rule that sends them to the critical capacity."
  value       = local.gateway_critical_matches
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
  precondition {
    condition     = length(local.gateway_problems) == 0
    error_message = "Request classes: ${join("; ", local.gateway_problems)}."
  }
}

output "gateway_main_matches" {
  description = "Gateway API HTTPRouteMatch list ({ path, method }) of the lower-class methods named on routes whose other methods are critical: a rule with these to the main capacity outranks the critical rule's match of the same path without a method."
  value       = local.gateway_main_matches
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
  precondition {
    condition     = length(local.gateway_problems) == 0
    error_message = "Request classes: ${join("; ", local.gateway_problems)}."
  }
}

output "sample_paths" {
  description = "route => paths it serves (a `:param` filled in, a wildcard route's prefix and one subpath): for checks that send each route's requests through rules built from these patterns."
  value       = local.sample_paths
  precondition {
    condition     = length(local.problems) == 0
    error_message = "Request classes: ${join("; ", local.problems)}."
  }
}
