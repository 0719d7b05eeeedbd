# Offline: the module has no provider. A fixture of every route shape, the app's manifests, then
# planted bad tables: each must fail every output's precondition (a root reading any of them
# cannot plan; expect_failures lists them all) and `problems` must name what is wrong.

variables {
  manifest = <<-EOT
    spin_manifest_version = 2
    [application]
    name = "fixture"

    # Classes (a comment inside the table is fine).
    [application.tool.seckill.request_classes]
    "/" = "read"
    "/hook" = "critical"   # trailing comment
    "/admin/things" = { GET = "sale", "*" = "critical" }
    "/admin/things/:id/..." = { GET = "sale", HEAD = "read", "*" = "critical" }
    "/jobs/:job" = "critical"
    "/buy/:event_id/orders/:order_id/pay.json" = "sale"
    "/files/..." = { POST = "critical", "*" = "read" }
    "/shop/*" = { GET = "read", "*" = "entry" }
    "/..." = "read"

    [[trigger.http]]
    route = "/"
    component = "c"
      [[trigger.http]]
    route = "/hook"
    component = "c"
    [[trigger.http]]
    route = "/admin/things"
    component = "c"
    [[trigger.http]]
    route = "/admin/things/:id/..."
    component = "c"
    [[trigger.http]]
    route = "/jobs/:job"
    component = "c"
    [[trigger.http]]
    route = "/buy/:event_id/orders/:order_id/pay.json"
    component = "c"
    [[trigger.http]]
    route = "/files/..."
    component = "c"
    [[trigger.http]]
    route = "/shop/*"
    component = "c"
    [[trigger.http]]
    route = "/..."
    component = "c"
    [[trigger.http]]
    route = { private = true }
    component = "c"

    [component.c]
    source = "c.wasm"
    [component.c.variables]
    route = "not a route"
  EOT
}

run "every_route_shape" {
  command = plan

  assert {
    condition     = output.problems == []
    error_message = "the fixture's table is read whole: ${jsonencode(output.problems)}"
  }
  assert {
    condition     = output.routes == ["/", "/hook", "/admin/things", "/admin/things/:id/...", "/jobs/:job", "/buy/:event_id/orders/:order_id/pay.json", "/files/...", "/shop/*", "/..."]
    error_message = "the [[trigger.http]] routes in order (an indented header too; no private route, no component's `route` variable): ${jsonencode(output.routes)}"
  }
  assert {
    condition = jsonencode(output.classes) == jsonencode({
      "/"                                        = { "*" = "read" }
      "/hook"                                    = { "*" = "critical" }
      "/admin/things"                            = { GET = "sale", HEAD = "sale", "*" = "critical" }
      "/admin/things/:id/..."                    = { GET = "sale", HEAD = "read", "*" = "critical" }
      "/jobs/:job"                               = { "*" = "critical" }
      "/buy/:event_id/orders/:order_id/pay.json" = { "*" = "sale" }
      "/files/..."                               = { POST = "critical", "*" = "read" }
      "/shop/*"                                  = { GET = "read", HEAD = "read", "*" = "entry" }
      "/..."                                     = { "*" = "read" }
    })
    error_message = "one class, or one per method with \"*\" for the rest; HEAD takes GET's class unless named: ${jsonencode(output.classes)}"
  }
  assert {
    condition = output.critical_pairs == [
      { route = "/hook", method = "*" },
      { route = "/admin/things", method = "*" },
      { route = "/admin/things/:id/...", method = "*" },
      { route = "/jobs/:job", method = "*" },
      { route = "/files/...", method = "POST" },
    ]
    error_message = "the critical (route, method) pairs: ${jsonencode(output.critical_pairs)}"
  }
  assert {
    condition = jsonencode([for c in output.critical_routes : [c.route, c.methods, c.except_methods]]) == jsonencode([
      ["/hook", [], []],
      ["/admin/things", [], ["GET", "HEAD"]],
      ["/admin/things/:id/...", [], ["GET", "HEAD"]],
      ["/jobs/:job", [], []],
      ["/files/...", ["POST"], []],
    ])
    error_message = "critical routes: every method but the lower-class ones named, or the critical methods named: ${jsonencode(output.critical_routes)}"
  }
  assert {
    condition = jsonencode(output.alb_path_patterns) == jsonencode({
      "/"                                        = ["/"]
      "/hook"                                    = ["/hook"]
      "/admin/things"                            = ["/admin/things"]
      "/admin/things/:id/..."                    = ["/admin/things/*"]
      "/jobs/:job"                               = ["/jobs/*"]
      "/buy/:event_id/orders/:order_id/pay.json" = ["/buy/*/orders/*/pay.json"]
      "/files/..."                               = ["/files", "/files/*"]
      "/shop/*"                                  = ["/shop", "/shop/*"]
      "/..."                                     = ["/*"]
    })
    error_message = "ALB patterns: :param -> *, a trailing /... -> the prefix and its subpaths: ${jsonencode(output.alb_path_patterns)}"
  }
  assert {
    condition = jsonencode(output.path_regexes) == jsonencode({
      "/"                                        = "^/$"
      "/hook"                                    = "^/hook$"
      "/admin/things"                            = "^/admin/things$"
      "/admin/things/:id/..."                    = "^/admin/things/[^/]+(/.*)?$"
      "/jobs/:job"                               = "^/jobs/[^/]+$"
      "/buy/:event_id/orders/:order_id/pay.json" = "^/buy/[^/]+/orders/[^/]+/pay\\.json$"
      "/files/..."                               = "^/files(/.*)?$"
      "/shop/*"                                  = "^/shop(/.*)?$"
      "/..."                                     = "^(/.*)?$"
    })
    error_message = "anchored RE2, literal segments escaped: ${jsonencode(output.path_regexes)}"
  }
  assert {
    condition = jsonencode(output.gateway_paths) == jsonencode({
      "/"                                        = { type = "Exact", value = "/" }
      "/hook"                                    = { type = "Exact", value = "/hook" }
      "/admin/things"                            = { type = "Exact", value = "/admin/things" }
      "/admin/things/:id/..."                    = { type = "RegularExpression", value = "^/admin/things/[^/]+(/.*)?$" }
      "/jobs/:job"                               = { type = "RegularExpression", value = "^/jobs/[^/]+$" }
      "/buy/:event_id/orders/:order_id/pay.json" = { type = "RegularExpression", value = "^/buy/[^/]+/orders/[^/]+/pay\\.json$" }
      "/files/..."                               = { type = "PathPrefix", value = "/files" }
      "/shop/*"                                  = { type = "PathPrefix", value = "/shop" }
      "/..."                                     = { type = "PathPrefix", value = "/" }
    })
    error_message = "Gateway API paths: Exact, PathPrefix for a trailing wildcard, RegularExpression with a :param: ${jsonencode(output.gateway_paths)}"
  }
  assert {
    condition = jsonencode(output.gateway_critical_matches) == jsonencode([
      { path = { type = "Exact", value = "/hook" } },
      { path = { type = "Exact", value = "/admin/things" } },
      { path = { type = "RegularExpression", value = "^/admin/things/[^/]+(/.*)?$" } },
      { path = { type = "RegularExpression", value = "^/jobs/[^/]+$" } },
      { method = "POST", path = { type = "PathPrefix", value = "/files" } },
    ])
    error_message = "one match per critical route (with its method where only some methods are critical): ${jsonencode(output.gateway_critical_matches)}"
  }
  assert {
    condition = jsonencode(output.gateway_main_matches) == jsonencode([
      { method = "GET", path = { type = "Exact", value = "/admin/things" } },
      { method = "HEAD", path = { type = "Exact", value = "/admin/things" } },
      { method = "GET", path = { type = "RegularExpression", value = "^/admin/things/[^/]+(/.*)?$" } },
      { method = "HEAD", path = { type = "RegularExpression", value = "^/admin/things/[^/]+(/.*)?$" } },
    ])
    error_message = "the lower-class methods of routes that are otherwise critical, with their method: ${jsonencode(output.gateway_main_matches)}"
  }
  assert {
    condition = alltrue(flatten([
      for r, paths in output.sample_paths : [
        for p in paths : can(regex(output.path_regexes[r], p)) && anytrue([
          for g in output.alb_path_patterns[r] : can(regex("^${replace(replace(g, ".", "\\."), "*", ".*")}$", p))
        ])
      ]
    ]))
    error_message = "each route's sample paths match its expression and one of its ALB patterns: ${jsonencode(output.sample_paths)}"
  }
}

# --- The app's manifests (the module's path is infra/terraform/modules/request-classes) ---------

run "reads_spin_toml" {
  command = plan

  variables {
    manifest = file("../../../../spin.toml")
  }

  assert {
    condition     = output.problems == [] && length(output.routes) == length(regexall("(?m)^\\[\\[trigger\\.http\\]\\]", var.manifest))
    error_message = "every [[trigger.http]] route of spin.toml has a class: ${jsonencode(output.problems)}"
  }
  assert {
    condition     = alltrue(flatten([for r, ms in output.classes : [for m, c in ms : contains(["critical", "sale", "entry", "read"], c)]]))
    error_message = "every class is one of critical, sale, entry, read"
  }
  assert {
    condition = (
      output.classes["/api/payments/webhook"] == { "*" = "critical" } &&
      output.classes["/admin/jobs/:job"] == { "*" = "critical" } &&
      lookup(output.classes["/admin/events"], "POST", null) == null && output.classes["/admin/events"]["*"] == "critical" && output.classes["/admin/events"]["GET"] == "sale" &&
      output.classes["/admin/events/:event_id/..."]["*"] == "critical" && output.classes["/admin/events/:event_id/..."]["HEAD"] == "sale"
    )
    error_message = "the payment webhook and the job routes (GET and POST) are critical, and so are operators' writes; operators' reads are not"
  }
  assert {
    condition     = alltrue([for p in output.critical_pairs : startswith(p.route, "/admin/") || p.route == "/api/payments/webhook"])
    error_message = "no buyer route is critical: ${jsonencode(output.critical_pairs)}"
  }
}

run "spin_http_toml_has_the_same_classes" {
  command = plan

  variables {
    manifest = file("../../../../spin.http.toml")
  }

  assert {
    condition     = output.problems == [] && output.classes == run.reads_spin_toml.classes && output.critical_routes == run.reads_spin_toml.critical_routes
    error_message = "spin.http.toml (generated from spin.toml) carries the same classes: ${jsonencode(output.problems)}"
  }
}

# --- Planted bad tables ---------------------------------------------------------------------

run "a_route_without_a_class_fails" {
  command = plan

  variables {
    manifest = <<-EOT
      [application.tool.seckill.request_classes]
      "/a" = "read"
      [[trigger.http]]
      route = "/a"
      [[trigger.http]]
      route = "/b/:id"
    EOT
  }

  expect_failures = [output.routes, output.classes, output.critical_pairs, output.critical_routes, output.alb_path_patterns, output.path_regexes, output.gateway_paths, output.gateway_critical_matches, output.gateway_main_matches, output.sample_paths]
  assert {
    condition     = output.problems == ["route /b/:id has no request class in [application.tool.seckill.request_classes]"]
    error_message = "the route is named: ${jsonencode(output.problems)}"
  }
}

run "an_unknown_class_fails" {
  command = plan

  variables {
    manifest = <<-EOT
      [application.tool.seckill.request_classes]
      "/a" = "vip"
      "/b" = { POST = "urgent", "*" = "read" }
      [[trigger.http]]
      route = "/a"
      [[trigger.http]]
      route = "/b"
    EOT
  }

  expect_failures = [output.routes, output.classes, output.critical_pairs, output.critical_routes, output.alb_path_patterns, output.path_regexes, output.gateway_paths, output.gateway_critical_matches, output.gateway_main_matches, output.sample_paths]
  assert {
    condition     = length(output.problems) == 2 && strcontains(join("\n", output.problems), "route /b: POST has the unknown class urgent") && strcontains(join("\n", output.problems), "route /a: the unknown class vip")
    error_message = "both unknown classes are named: ${jsonencode(output.problems)}"
  }
}

run "a_class_for_no_route_fails" {
  command = plan

  variables {
    manifest = <<-EOT
      [application.tool.seckill.request_classes]
      "/a" = "read"
      "/gone" = "critical"
      [[trigger.http]]
      route = "/a"
    EOT
  }

  expect_failures = [output.routes, output.classes, output.critical_pairs, output.critical_routes, output.alb_path_patterns, output.path_regexes, output.gateway_paths, output.gateway_critical_matches, output.gateway_main_matches, output.sample_paths]
  assert {
    condition     = output.problems == ["[application.tool.seckill.request_classes] names /gone, which no [[trigger.http]] route is"]
    error_message = "the stray entry is named: ${jsonencode(output.problems)}"
  }
}

run "a_table_by_method_without_a_default_fails" {
  command = plan

  variables {
    manifest = <<-EOT
      [application.tool.seckill.request_classes]
      "/a" = { GET = "read", post = "critical" }
      [[trigger.http]]
      route = "/a"
    EOT
  }

  expect_failures = [output.routes, output.classes, output.critical_pairs, output.critical_routes, output.alb_path_patterns, output.path_regexes, output.gateway_paths, output.gateway_critical_matches, output.gateway_main_matches, output.sample_paths]
  assert {
    condition     = strcontains(join("\n", output.problems), "route /a: a class by method needs \"*\"") && strcontains(join("\n", output.problems), "route /a: post is not a method")
    error_message = "a missing \"*\" and a method that is not one are named: ${jsonencode(output.problems)}"
  }
}

run "a_manifest_without_the_table_fails" {
  command = plan

  variables {
    manifest = <<-EOT
      [application]
      name = "x"
      [[trigger.http]]
      route = "/a"
    EOT
  }

  expect_failures = [output.routes, output.classes, output.critical_pairs, output.critical_routes, output.alb_path_patterns, output.path_regexes, output.gateway_paths, output.gateway_critical_matches, output.gateway_main_matches, output.sample_paths]
  assert {
    condition     = length(output.problems) == 2 && startswith(output.problems[0], "the manifest has 0 [application.tool.seckill.request_classes] tables")
    error_message = "no table, and the route without a class: ${jsonencode(output.problems)}"
  }
}

run "a_line_the_reader_cannot_read_fails" {
  command = plan

  variables {
    manifest = <<-EOT
      [application.tool.seckill.request_classes]
      '/a' = "read"
      "/b" = { GET = "read", "*" = critical }
      [[trigger.http]]
      route = "/a"
      [[trigger.http]]
      route = "/b"
    EOT
  }

  expect_failures = [output.routes, output.classes, output.critical_pairs, output.critical_routes, output.alb_path_patterns, output.path_regexes, output.gateway_paths, output.gateway_critical_matches, output.gateway_main_matches, output.sample_paths]
  assert {
    condition = alltrue([for want in [
      "a line of [application.tool.seckill.request_classes] that is not",
      "route /a has no request class",
      "route /b: an inline table this module cannot read",
    ] : strcontains(join("\n", output.problems), want)])
    error_message = "a literal-string key and a bare class are refused, not guessed: ${jsonencode(output.problems)}"
  }
}

run "a_method_a_gateway_cannot_match_fails_the_gateway_outputs" {
  command = plan

  variables {
    manifest = <<-EOT
      [application.tool.seckill.request_classes]
      "/a" = { PURGE = "critical", "*" = "read" }
      [[trigger.http]]
      route = "/a"
    EOT
  }

  expect_failures = [output.gateway_critical_matches, output.gateway_main_matches]
  assert {
    condition     = output.problems == [] && jsonencode(output.critical_pairs) == jsonencode([{ method = "PURGE", route = "/a" }])
    error_message = "the table is valid, and an ALB can match any method"
  }
}
