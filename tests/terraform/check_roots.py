#!/usr/bin/env python3
"""Checks every Terraform root under infra/terraform/ (aws, serverless, spinkube) against the
app's manifests, by parsing the .tf files (python-hcl2) and spin.toml / spin.http.toml (tomllib).

Only the AWS root can be initialised here (its provider is in the local mirror); the serverless
and SpinKube roots use providers that cannot be installed, so this parse is what checks their
wiring. For each root:

  module      it calls modules/app-variables, whose URLs and hosts come from one list of
              endpoints (checked in the module's own HCL too);
  supplied    every variable a deployment must set is delivered: `required = true`, no default,
              used by allowed_outbound_hosts, or a default that names the local stack (loopback);
              so is every variable modules/app-variables makes (payment_api_key included); any
              other optional one (a default such as "": job_key, settings) may be left to it;
  settings    the root's `settings` input (a map) is validated against modules/app-variables'
              setting_patterns, passed to the module, and the module's rendering (`settings`:
              name=value pairs in name order joined by commas, with the module's
              `trusted_proxies` as one more pair, set only when there is any) reaches the
              non-secret variables; the module's names and defaults are the app's
              (crates/spin-edge/src/config.rs, `Settings`) but for the trusted proxies, which a
              root passes from its network (aws: the load balancer's public subnets; spinkube:
              its `trusted_proxies` input); both manifests declare `settings` as a non-secret
              variable with a default;
  from module each delivered connection variable and secret is the module's output of that name,
              so redis_origin / pg_host come from the endpoints the URLs are built from;
  secret      every `secret = true` variable travels as a secret (Secrets Manager, a Kubernetes
              Secret, a deploy command's environment), never through user_data, a command line
              or a workload spec in the clear;
  sensitive   every input that holds a password, token or key, and every output that carries
              secret material, is `sensitive = true`;
  payment     the payment provider's API: every variable modules/app-variables makes is delivered
              (payment_api_key too, though the manifests give it a default); payment_api_url is
              an input in the clear (not sensitive, the manifests' default, validated as an
              https:// origin) passed to the module and delivered with the hosts; payment_api_key
              is an optional attribute of the sensitive `secrets` input (default "", the
              manifests' default), as in the module, which passes it on from var.secrets;
  hosts       with example endpoints of the root's services, the manifests' allowed_outbound_hosts
              (rendered with the redis_origin / pg_host / payment_api_url the root passes;
              "{{ redis_origin }}" is a whole entry, resolved and then parsed, so its scheme
              comes from the variable) parse as real Spin parses them (rediss:// needs an
              explicit port) and admit every URL in redis_url and pg_url, and payment_api_url,
              in every component of both manifests that reads them; redis_origin itself is
              scheme://host:port with redis_url's scheme; the root's multi-node host patterns
              too. The manifests' own defaults admit their default URLs likewise;
  spin        Spin's settings do not waste its CPU: no RUST_BACKTRACE (nor
              RUST_LIB_BACKTRACE) set to anything but 0 in any deploy path; self-hosted Spin (aws)
              runs `spin up --log-dir "" --runtime-config-file ...` with a static variables
              provider, RUST_BACKTRACE explicitly unset and RUST_LIB_BACKTRACE=0; the SpinApp
              (spinkube) loads a runtime config with a static provider from a Secret; the
              serverless platforms take no such setting, so only the first rule applies there.
              DEPLOY.md's `spin up` commands follow the same rules, and
              files/spin-runtime-config.sh, run on both manifests, writes a static provider
              holding every variable (environment values first, then defaults), mode 0600.
              The AWS boot script is a template with one branch per `runtime`: the Spin rules
              are checked on its "spin" rendering (with the files it ships but the host's);
  host        the AWS root's `runtime` is validated ("spin" by default, or "seckill-host"); its
              "seckill-host" rendering installs no Spin, runs files/seckill-host.service, whose
              ExecStart is `seckill-host ... up --manifest .../spin.toml`, whose environment has
              RUST_BACKTRACE unset and RUST_LIB_BACKTRACE=0, and whose EnvironmentFile= lines
              (unit and drop-in) read the files the boot writes: /etc/seckill/boot.env and the
              secrets file the ExecStartPre= writes in the runtime directory.
  alerts      the SpinKube root loads infra/prometheus/seckill.rules.yml's groups as they are into a
              PrometheusRule (monitoring.coreos.com/v1) in its namespace, behind a switch that is
              off by default (the kind needs the Prometheus operator's CRDs).
  dashboard   the SpinKube root ships infra/grafana/seckill.dashboard.json as it is in a ConfigMap
              of its namespace labelled for Grafana's dashboard sidecar, on by default.
  critical    the SpinKube root gives the critical routes (spin.http.toml's request classes) a
              SpinApp of their own: the app's image, executor and runtime config, requests equal
              to limits, replicas from a validated variable; the ticker calls its Service; and its
              HTTPRoutes, whose matches come from modules/request-classes (evaluated with
              terraform: the module is provider-free), send every route's sample paths with every
              method, ranked as Envoy Gateway ranks matches, to the critical SpinApp exactly when
              the manifest's class of that (route, method) is critical.
  jobs        every root takes `scheduler_token` (sensitive, validated to 32 characters or more;
              required on SpinKube) and passes it to modules/app-variables, which appends
              `scheduler:scheduler:<token>` to the operators (roles viewer, operator, scheduler)
              and hands out no operator's secret; SpinKube's ticker sends that token from a
              header file mounted from the Secret and calls the job routes only.
  network     the SpinKube root's NetworkPolicy (on by default) selects both SpinApps' pods and
              admits requests from the proxies' namespaces and the ticker only; its egress rules
              are DNS (53), Redis (its nodes' ports), Postgres (its port) and HTTPS (443 and
              payment_api_url's port) at 0.0.0.0/0 and ::/0 with the private, loopback and
              link-local ranges excepted; none without destinations or ports.
  demo        every root has `demo_environment` (a bool, false) passed to the module, whose
              pattern for demo_login admits "true" only then.
  cdn         the AWS root's CloudFront cache key holds exactly the query parameters that the
              components serving its cached paths (spin.toml's routes) read in their sources
              (`http::query_param(req, "x")`, `shards_hint`), no others.

Every root and every module (modules/*) is also checked for references: each var.X, local.X,
module.X (and module.X.OUT of a local module), data.T.N and resource T.N its expressions use is
declared in that root or module (what `terraform validate` would say, for the roots it cannot
initialise here).

A self-check then breaks copies of the roots in a temporary directory, one defect at a time, and
expects each defect to be reported: the checks are known to be able to fail.

Prints one line per check and closes with `check_roots: N passed, N failed`.
Usage: python3 tests/terraform/check_roots.py [--repo DIR] [--no-self-check]
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

try:
    import hcl2
except ImportError:  # pragma: no cover - reported, not hidden
    print("check_roots: python-hcl2 is not installed (python3 -m pip install python-hcl2)", file=sys.stderr)
    sys.exit(2)

ROOTS = ("aws", "serverless", "spinkube")
MANIFESTS = ("spin.toml", "spin.http.toml")
MODULE_SOURCE = "../modules/app-variables"
# The app's optional settings (their names and defaults), travelling as one Spin variable.
SETTINGS_SOURCE = "crates/spin-edge/src/config.rs"
SETTINGS_VARIABLE = "settings"
# The one setting a root derives from its network, not its `settings` input: the module's input
# `trusted_proxies`, and what each root passes to it (None: no proxy the root knows of).
TRUSTED_PROXIES = "trusted_proxies"
ROOT_TRUSTED_PROXIES = {"aws": "local.public_cidrs", "serverless": None, "spinkube": "var.trusted_proxies"}

# Example endpoints of each root's services: what a node host really looks like there.
SAMPLE_NODES = {
    "aws": {
        "memorydb": "clustercfg.seckill-redis-{i}.abc123.memorydb.us-east-1.amazonaws.com",
        "elasticache": "master.seckill-redis-{i}.abc123.use1.cache.amazonaws.com",
    },
    "serverless": {"upstash": "usw1-seckill-{i}-31337.upstash.io"},
    "spinkube": {"managed": "redis-{i}.example.net"},
}
SAMPLE_PG_HOST = {
    "aws": "seckill-postgres.abc123.us-east-1.rds.amazonaws.com",
    "serverless": "ep-cool-darkness-123456.us-east-1.aws.neon.tech",
    "spinkube": "db.example.net",
}
SAMPLE_PORT = {"aws": 6379, "serverless": 6379, "spinkube": 6380}
# The payment provider's API: its origin (in the clear, an allowed_outbound_hosts entry of its
# own) and its key (a secret the manifests make optional: "" turns the API off).
PAYMENT_API_URL = "payment_api_url"
PAYMENT_API_KEY = "payment_api_key"
# The variables a component reaches by URL: each must be admitted by its allowed_outbound_hosts.
REACHED_URLS = ("redis_url", "pg_url", PAYMENT_API_URL)

SECRETISH_INPUT = re.compile(r"(^|_)(password|passwords|secrets|api_key|token|access_token|auth_token|private_key)$")
SECRET_ATTRS = re.compile(r"\.(password|passwords|database_password|rest_token|read_only_rest_token|connection_uri|auth_token|secret_string)\b")
SECRET_MODULE_OUTPUTS = ("module.app_variables.spin_variables", "module.app_variables.environment", "module.runtime_config.toml")
# Places that must never carry a secret value in the clear.
CLEAR_SINKS = {"user_data", "command", "args"}
CLEAR_RESOURCES = {"kubernetes_manifest", "kubernetes_deployment_v1", "kubernetes_deployment", "aws_launch_template", "aws_instance"}
SECRET_SINK_TYPES = {"aws_secretsmanager_secret_version", "kubernetes_secret_v1", "kubernetes_secret", "terraform_data"}


# ---------------------------------------------------------------------------------------------
# HCL helpers (python-hcl2 keeps quotes around strings and ${...} around expressions)
# ---------------------------------------------------------------------------------------------

def unq(s):
    if isinstance(s, str) and len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        return s[1:-1]
    return s


def expr(s) -> str:
    """The expression text of a parsed value: `${x}` alone becomes `x`, a template stays one."""
    if isinstance(s, str):
        s = unq(s)
        if s.startswith("${") and s.endswith("}"):
            depth = 0
            for i, c in enumerate(s[1:], start=1):
                depth += c == "{"
                depth -= c == "}"
                if depth == 0:
                    return s[2:-1] if i == len(s) - 1 else s
        return s
    return json.dumps(s)


def clean(value):
    """Strips python-hcl2's quoting from keys and the block markers."""
    if isinstance(value, dict):
        return {unq(k): clean(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


@dataclass
class Root:
    name: str
    path: Path
    text: str = ""
    variables: dict = field(default_factory=dict)
    locals: dict = field(default_factory=dict)
    modules: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)  # (type, name) -> body
    data: dict = field(default_factory=dict)  # (type, name) -> body
    outputs: dict = field(default_factory=dict)


# Parsed files by their text: the self-check's copies differ from the tree by one edit each, and
# parsing is most of a run's time.
_PARSED: dict = {}


def load_root(path: Path) -> Root:
    root = Root(path.name, path)
    for tf in sorted(path.glob("*.tf")):
        text = tf.read_text()
        root.text += text + "\n"
        if text not in _PARSED:
            _PARSED[text] = clean(hcl2.loads(text))
        doc = json.loads(json.dumps(_PARSED[text]))  # a copy: callers may not share it
        for block in doc.get("variable", []):
            root.variables.update(block)
        for block in doc.get("locals", []):
            root.locals.update(block)
        for block in doc.get("module", []):
            root.modules.update(block)
        for block in doc.get("output", []):
            root.outputs.update(block)
        for kind, into in (("resource", root.resources), ("data", root.data)):
            for block in doc.get(kind, []):
                for rtype, named in block.items():
                    for rname, body in named.items():
                        into[(rtype, rname)] = body
    return root


def refs_of(value) -> str:
    """The text to search for references in; `keys(local.X)` only names X's keys."""
    text = json.dumps(value)
    return re.sub(r"keys\(local\.(\w+)\)", r"KEYS_OF(\1)", text)


def local_closure(root: Root, value, seen=None) -> str:
    """The value's text with every local it uses expanded (transitively)."""
    seen = set() if seen is None else seen
    text = refs_of(value)
    parts = [text]
    for name in re.findall(r"\blocal\.(\w+)", text):
        if name in seen or name not in root.locals:
            continue
        seen.add(name)
        parts.append(f"<local.{name}>" + local_closure(root, root.locals[name], seen))
    return "\n".join(parts)


def sensitive_vars(root: Root) -> set:
    return {n for n, v in root.variables.items() if v.get("sensitive") is True}


def secret_material(root: Root, text: str) -> list:
    """What secret material the text refers to."""
    found = []
    if re.search(r"\blocal\.spin_secret_variables\b", text):
        found.append("local.spin_secret_variables")
    for out in SECRET_MODULE_OUTPUTS:
        if out in text:
            found.append(out)
    for v in sensitive_vars(root):
        if re.search(rf"\bvar\.{re.escape(v)}\b", text):
            found.append(f"var.{v}")
    for m in SECRET_ATTRS.finditer(text):
        found.append(m.group(0).lstrip("."))
    return found


def dict_literal(root: Root, name: str):
    value = root.locals.get(name)
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------------------------------------
# Real Spin's allowed_outbound_hosts (crates/outbound-networking-config/src/allowed_hosts.rs)
# ---------------------------------------------------------------------------------------------

WELL_KNOWN_PORTS = {"postgres": 5432, "mysql": 3306, "redis": 6379, "mqtt": 1883, "http": 80, "https": 443}


class AllowedHost:
    def __init__(self, text: str):
        text = text.strip()
        if "://" not in text:
            raise ValueError(f"{text!r} does not contain a scheme")
        scheme, rest = text.split("://", 1)
        host, port = rest.rsplit(":", 1) if ":" in rest else (rest, "")
        if "/" in port:
            port, path = port.split("/", 1)
            if path:
                raise ValueError(f"{text!r} has a path")
        if scheme != "*" and not scheme.isalpha():
            raise ValueError(f"scheme {scheme!r} contains non alphabetic character")
        self.scheme = scheme
        host = host.strip()
        if host == "*":
            self.host = ("any", None)
        else:
            try:
                self.host = ("cidr", ipaddress.ip_network(host, strict=False))
            except ValueError:
                if len(host.split("/")) > 1 and host.split("/")[1]:
                    raise ValueError(f"{text!r}: hosts must not contain paths")
                if host.startswith("*."):
                    if "*" in host[2:]:
                        raise ValueError(f"invalid allowed host {host}: wildcards are allowed only as prefixes")
                    self.host = ("suffix", host[1:])
                elif "*" in host:
                    raise ValueError(f"invalid allowed host {host}: wildcards are allowed only as subdomains")
                else:
                    self.host = ("exact", host.rstrip("/"))
        if port == "":
            if scheme not in WELL_KNOWN_PORTS:
                raise ValueError(f"{text!r}: no port was provided and the scheme {scheme!r} does not have a known default port number")
            self.ports = [(WELL_KNOWN_PORTS[scheme], WELL_KNOWN_PORTS[scheme] + 1)]
        elif port == "*":
            self.ports = None
        elif ".." in port:
            a, b = port.split("..", 1)
            self.ports = [(int(a), int(b))]
        else:
            self.ports = [(int(port), int(port) + 1)]

    def allows(self, url: str) -> bool:
        u = urlsplit(url)
        scheme, host, port = u.scheme, u.hostname or "", u.port
        if self.scheme != "*" and self.scheme != scheme:
            return False
        kind, h = self.host
        if kind == "suffix" and not host.endswith(h):
            return False
        if kind == "exact" and host != h:
            return False
        if kind == "cidr":
            try:
                if ipaddress.ip_address(host) not in h:
                    return False
            except ValueError:
                return False
        if self.ports is None:
            return True
        port = port if port is not None else WELL_KNOWN_PORTS.get(scheme)
        return port is not None and any(a <= port < b for a, b in self.ports)


def render(template: str, values: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: values[m.group(1)], template)


# ---------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------

class Report:
    def __init__(self, quiet=False):
        self.passed = 0
        self.failed = 0
        self.quiet = quiet
        self.failures: list[str] = []

    def check(self, name: str, problems: list):
        if problems:
            self.failed += 1
            self.failures.extend(f"{name}: {p}" for p in problems)
            if not self.quiet:
                print(f"FAIL {name}")
                for p in problems:
                    print(f"     - {p}")
        else:
            self.passed += 1
            if not self.quiet:
                print(f"ok   {name}")


def load_manifests(repo: Path):
    manifests = {}
    for m in MANIFESTS:
        with (repo / m).open("rb") as f:
            manifests[m] = tomllib.load(f)
    return manifests


def deployment_variables(manifests) -> dict:
    """Variables a deployment must set, with why."""
    need = {}
    for mname, man in manifests.items():
        for name, decl in man.get("variables", {}).items():
            if decl.get("required"):
                need.setdefault(name, f"required = true in {mname}")
            elif "default" not in decl:
                need.setdefault(name, f"no default in {mname}")
            elif re.search(r"127\.0\.0\.1|localhost|\[::1\]", str(decl["default"])):
                need.setdefault(name, f"its default in {mname} names the local stack")
        for comp in man.get("component", {}).values():
            for tmpl in comp.get("allowed_outbound_hosts", []):
                for v in re.findall(r"\{\{\s*(\w+)\s*\}\}", tmpl):
                    need.setdefault(v, f"allowed_outbound_hosts uses it in {mname}")
    return need


def check_module(repo: Path, report: Report):
    mod = load_root(repo / "infra/terraform/modules/app-variables")
    loc = {k: expr(v) for k, v in mod.locals.items() if not isinstance(v, dict)}
    sv = mod.locals.get("spin_variables", {})
    problems = []
    want = {
        "redis_addrs": (r'"\$\{e\.host\}:\$\{e\.port\}"', "each node as host:port, the port written out (rediss:// has no default port)"),
        "redis_scheme": (r"^rediss$", "redis_scheme: rediss (TLS)"),
        "redis_url": (r'^(?=.*local\.redis_addrs)(?=.*"\$\{local\.redis_scheme\}://)', "redis_url: local.redis_scheme:// over local.redis_addrs"),
        "redis_host": (r"var\.redis_host_pattern.*local\.redis_addrs", "redis_host: the pattern, or the one node of local.redis_addrs"),
        "redis_origin": (r'"\$\{local\.redis_scheme\}://\$\{local\.redis_host\}"', "redis_origin: local.redis_scheme://local.redis_host (redis_url's scheme)"),
        "pg_host": (r'^\$\{var\.postgres\.host\}:\$\{var\.postgres\.port\}$', "pg_host: host:port of var.postgres"),
        "pg_url": (r"local\.pg_host.*sslmode=require", "pg_url: local.pg_host with sslmode=require"),
    }
    for name, (pattern, what) in want.items():
        if not re.search(pattern, loc.get(name, ""), re.S):
            problems.append(f"module local.{name} is not {what}: {loc.get(name)!r}")
    for name in ("redis_url", "redis_origin", "pg_url", "pg_host"):
        if expr(sv.get(name, "")) != f"local.{name}":
            problems.append(f"module spin_variables.{name} is not local.{name}")
    for name in sorted(set(sv) - {"redis_url", "redis_origin", "pg_url", "pg_host", "jwt_secret", "admission_secret", "operators", "payment_webhook_secrets", PAYMENT_API_URL, PAYMENT_API_KEY}):
        problems.append(f"module spin_variables.{name} is not a variable the manifests declare")
    hosts = mod.outputs.get("hosts", {}).get("value", {})
    want_hosts = {"redis_origin": "local.redis_origin", "pg_host": "local.pg_host", PAYMENT_API_URL: f"var.{PAYMENT_API_URL}"}
    if not (isinstance(hosts, dict) and {k: expr(v) for k, v in hosts.items()} == want_hosts):
        problems.append(f"module output hosts is not {{ {', '.join(f'{k} = {v}' for k, v in want_hosts.items())} }}")
    conditions = [expr(c.get("condition", "")) for c in mod.outputs.get("spin_variables", {}).get("precondition", [])]
    if not any(re.search(r"length\(local\.redis_uncovered\) == 0", c) for c in conditions):
        problems.append("module output spin_variables has no precondition that redis_origin admits every node (local.redis_uncovered)")
    schemes = module_schemes(mod)
    if None in schemes or schemes[0] != schemes[1]:
        problems.append(f"module redis_url's scheme and redis_origin's differ: {schemes[0]!r} vs {schemes[1]!r}")
    for out in ("spin_variables", "environment"):
        if mod.outputs.get(out, {}).get("sensitive") is not True:
            problems.append(f"module output {out} is not sensitive")
    report.check("module app-variables: URLs and hosts from one list of endpoints, TLS, redis_origin with redis_url's scheme", problems)

    # The payment provider's API: the origin in the clear, the key a secret, optional.
    manifests = load_manifests(repo)
    problems = payment_input_problems(mod, manifests, "module")
    if expr(sv.get(PAYMENT_API_URL, "")) != f"var.{PAYMENT_API_URL}":
        problems.append(f"module spin_variables.{PAYMENT_API_URL} is not var.{PAYMENT_API_URL}")
    # Every secret of the manifests the module makes comes from its sensitive `secrets` input
    # (the URLs apart: built from the endpoints and passwords).
    secret_names = {k for man in manifests.values() for k, d in man.get("variables", {}).items() if d.get("secret")}
    for name in sorted((set(sv) & secret_names) - {"redis_url", "pg_url"}):
        # operators: var.secrets.operators and the scheduler's entry (check_scheduler_credentials).
        if name == "operators" and expr(sv[name]) == "local.operators":
            continue
        if expr(sv[name]) != f"var.secrets.{name}":
            problems.append(f"module spin_variables.{name} is not var.secrets.{name}")
    for out in ("hosts", "allowed_outbound_hosts"):
        if mod.outputs.get(out, {}).get("sensitive") is True:
            problems.append(f"module output {out} is sensitive: it carries no secret (payment_api_url is public)")
    if f"var.{PAYMENT_API_URL}" not in expr(mod.outputs.get("allowed_outbound_hosts", {}).get("value", "")):
        problems.append(f"module output allowed_outbound_hosts leaves out var.{PAYMENT_API_URL} (the entry \"{{{{ {PAYMENT_API_URL} }}}}\")")
    report.check("module app-variables: the payment provider's API, payment_api_url in the clear and validated, payment_api_key an optional secret", problems)

    # The settings: one list of names (the app's), one rendering.
    problems = []
    app = app_settings(repo)
    defaults = {k: unq(v) for k, v in (mod.locals.get("setting_defaults") or {}).items()}
    if app is None or TRUSTED_PROXIES not in app:
        problems.append(f"{SETTINGS_SOURCE} has no `struct Settings` with `{TRUSTED_PROXIES}` and a `Default` to compare with")
    elif defaults != {k: v for k, v in app.items() if k != TRUSTED_PROXIES}:
        problems.append(f"module local.setting_defaults {defaults} differs from the app's settings and defaults ({SETTINGS_SOURCE}): {app}")
    if not re.search(r"local\.setting_defaults", loc.get("setting_patterns", "")):
        problems.append(f"module local.setting_patterns does not come from local.setting_defaults: {loc.get('setting_patterns')!r}")
    values = loc.get("setting_values", "")
    if values != 'merge(var.settings, length(var.trusted_proxies) > 0 ? {trusted_proxies = join(" ", var.trusted_proxies)} : {})':
        problems.append(f"module local.setting_values is not var.settings and, when any, trusted_proxies = the ranges joined by spaces: {values!r}")
    rendering = loc.get("settings", "")
    if not re.fullmatch(r'join\(",", \[for (\w+) in sort\(keys\(local\.setting_values\)\) : "\$\{\1\}=\$\{local\.setting_values\[\1\]\}"\]\)', rendering):
        problems.append(f"module local.settings is not the name=value pairs of local.setting_values in name order, joined by commas: {rendering!r}")
    only = loc.get("settings_variable", "")
    if not re.fullmatch(r"length\(local\.setting_values\) > 0 \? \{settings = local\.settings\} : \{\}", only):
        problems.append(f"module local.settings_variable is not {{ settings = local.settings }} when local.setting_values is not empty, else {{}}: {only!r}")
    tp = mod.variables.get(TRUSTED_PROXIES, {})
    if not any("cidrhost(" in expr(v.get("condition", "")) for v in tp.get("validation", [])):
        problems.append(f"module variable {TRUSTED_PROXIES} is missing or not validated as CIDR ranges (cidrhost)")
    for out, want in (("settings_variable", "local.settings_variable"), ("setting_patterns", "local.setting_patterns")):
        body = mod.outputs.get(out, {})
        if expr(body.get("value", "")) != want or body.get("sensitive") is True:
            problems.append(f"module output {out} is not {want}, in the clear")
    validations = mod.variables.get("settings", {}).get("validation", [])
    if not any("local.setting_patterns" in expr(v.get("condition", "")) for v in validations):
        problems.append("module variable settings is not validated against local.setting_patterns")
    report.check("module app-variables: the settings, one variable rendered from the app's names", problems)


def app_settings(repo: Path):
    """The app's settings and their defaults as strings, from `struct Settings` and its Default."""
    source = repo / SETTINGS_SOURCE
    text = source.read_text() if source.is_file() else ""
    struct = re.search(r"(?s)pub struct Settings \{(.*?)\n\}", text)
    default = re.search(r"(?s)impl Default for Settings \{.*?Settings \{(.*?)\}", text)
    if not (struct and default):
        return None
    names = re.findall(r"(?m)^\s*pub (\w+):", struct.group(1))
    values = dict(re.findall(r"(?m)^\s*(\w+): ([\w.:]+),", default.group(1)))
    # An optional setting (`None`) defaults to "" (none); an enum's variant (`PaymentMode::Test`)
    # is its name in the settings (`test`); a constant (`seckill_domain::net::DEFAULT_X`) its
    # value, read from crates/<crate>/src/<module>.rs.
    def literal(v):
        const = re.fullmatch(r"seckill_(\w+)::((?:\w+::)*)([A-Z][A-Z0-9_]*)", v)
        if const:
            module = const.group(2).rstrip(":").replace("::", "/") or "lib"
            source = repo / "crates" / const.group(1).replace("_", "-") / "src" / f"{module}.rs"
            text = source.read_text() if source.is_file() else ""
            m = re.search(rf"(?m)^\s*pub const {const.group(3)}: [\w:<>]+ = ([\w.]+);", text)
            return m.group(1).replace("_", "") if m else "?"
        return "" if v == "None" else v.rsplit("::", 1)[1].lower() if "::" in v else v.replace("_", "")
    return {n: literal(values.get(n, "?")) for n in names}


def module_schemes(mod: Root) -> tuple:
    """The schemes the module writes in front of redis_url's nodes and of redis_origin, read from
    its HCL (`${local.X}` replaced by a literal local X): (url scheme, origin scheme)."""
    loc = {k: expr(v) for k, v in mod.locals.items() if not isinstance(v, dict)}

    def literal(text: str) -> str:
        return re.sub(r"\$\{local\.(\w+)\}", lambda m: loc[m.group(1)] if re.fullmatch(r"[\w+.-]+", loc.get(m.group(1), "")) else m.group(0), text)

    url = re.search(r'"([\w*]+)://\$\{urlencode', literal(loc.get("redis_url", "")))
    origin = re.search(r'"([\w*]+)://\$\{local\.redis_host\}"', literal(loc.get("redis_origin", "")))
    return (url.group(1) if url else None, origin.group(1) if origin else None)


def simulate(root_name: str, hosts: list, port: int, pattern, schemes: tuple, api_url: str = "https://api.stripe.com") -> dict:
    """The module's values for these endpoints (its HCL is checked by check_module; the schemes
    are the ones it writes, so an origin whose scheme disagrees with the URLs' shows here)."""
    url_scheme, origin_scheme = schemes
    addrs = [f"{h}:{port}" for h in hosts]
    pg_host = f"{SAMPLE_PG_HOST[root_name]}:5432"
    host = pattern if pattern is not None else (addrs[0] if len(set(addrs)) == 1 else None)
    return {
        "redis_url": ",".join(f"{url_scheme}://user:p%40ss@{a}" for a in addrs),
        "redis_origin": f"{origin_scheme}://{host}" if host is not None and origin_scheme else None,
        "pg_url": f"postgres://app:s3cret@{pg_host}/seckill?sslmode=require",
        "pg_host": pg_host,
        # The module passes the root's input on (the input's default, checked elsewhere).
        PAYMENT_API_URL: api_url,
    }


def origin_problems(values: dict, label: str) -> list:
    """redis_origin on its own: scheme://host:port as Spin parses it, the scheme redis_url's
    nodes use (one entry for Redis: another scheme would admit none of them), every node covered."""
    origin = values["redis_origin"]
    try:
        allowed = AllowedHost(origin)
    except ValueError as e:
        return [f"{label}: redis_origin {origin!r} is not scheme://host:port as Spin parses it: {e}"]
    problems = []
    if not re.fullmatch(r"[a-z]+://[^/:]+:[^/:]+", origin):
        problems.append(f"{label}: redis_origin {origin!r} is not scheme://host:port with the port written out")
    url_schemes = sorted({urlsplit(u).scheme for u in values["redis_url"].split(",")})
    if url_schemes != [allowed.scheme]:
        problems.append(f"{label}: redis_origin's scheme {allowed.scheme!r} is not redis_url's ({', '.join(url_schemes)})")
    for url in values["redis_url"].split(","):
        if not allowed.allows(url):
            problems.append(f"{label}: redis_origin {origin!r} does not admit {re.sub(r'//[^@]*@', '//', url)}")
    return problems


def hosts_problems(manifests, values: dict, label: str) -> list:
    problems = []
    if values["redis_origin"] is None:
        return [f"{label}: no redis_origin covers the nodes"]
    problems += origin_problems(values, label)
    for mname, man in manifests.items():
        for cname, comp in man.get("component", {}).items():
            templates = comp.get("allowed_outbound_hosts", [])
            try:
                allowed = [AllowedHost(render(t, values)) for t in templates]
            except (ValueError, KeyError) as e:
                problems.append(f"{label}: {mname} component {cname}: allowed_outbound_hosts does not load: {e}")
                continue
            for var_tmpl in comp.get("variables", {}).values():
                for v in re.findall(r"\{\{\s*(\w+)\s*\}\}", var_tmpl):
                    if v not in REACHED_URLS:
                        continue
                    for url in values[v].split(","):
                        if not any(a.allows(url) for a in allowed):
                            shown = re.sub(r"//[^@]*@", "//", url)
                            problems.append(f"{label}: {mname} component {cname} may not reach {shown} ({v})")
    return problems


def var_default(root: Root, name: str):
    return root.variables.get(name, {}).get("default")


def host_patterns(root: Root) -> list:
    """Host patterns the root writes for several nodes (string literals like "*.x:port")."""
    found = []
    for lit in re.findall(r'"(\*\.[^"\s./]+\.[^"\s/]+)"', root.text):
        def sub(m):
            d = var_default(root, m.group(1))
            return str(unq(d)) if d is not None else m.group(0)
        found.append(re.sub(r"\$\{var\.(\w+)\}", sub, lit))
    return found


def manifest_default(manifests, name: str):
    """The one default both manifests give a variable (None when they give none or differ)."""
    defaults = {str(man.get("variables", {}).get(name, {}).get("default")) for man in manifests.values()
                if "default" in man.get("variables", {}).get(name, {})}
    return defaults.pop() if len(defaults) == 1 else None


def object_attributes(type_expr) -> dict:
    """The attributes of an HCL `object({...})` type, name -> its type text."""
    text = expr(type_expr) if not isinstance(type_expr, str) else unq(type_expr)
    text = text[2:-1] if text.startswith("${") and text.endswith("}") else text
    m = re.search(r"object\(\{(.*)\}\)", text, re.S)
    if not m:
        return {}
    return {k: v.strip() for k, v in re.findall(r"(\w+)\s*=\s*((?:optional\([^)]*\)|\w+(?:\([^)]*\))?))", m.group(1))}


def payment_input_problems(unit: Root, manifests, label: str) -> list:
    """A root's or the module's inputs for the payment provider's API: `payment_api_url` a
    validated, non-sensitive https:// origin with the manifests' default; `payment_api_key` an
    optional attribute of the sensitive `secrets` object, defaulting to the manifests' default."""
    problems = []
    url = unit.variables.get(PAYMENT_API_URL)
    want_url = manifest_default(manifests, PAYMENT_API_URL)
    if url is None:
        problems.append(f"{label} has no variable {PAYMENT_API_URL} (the provider's API origin)")
    else:
        if url.get("sensitive") is True:
            problems.append(f"variable {PAYMENT_API_URL} is sensitive: the origin is no secret (it is an allowed_outbound_hosts entry)")
        if want_url is None or unq(url.get("default")) != want_url:
            problems.append(f"variable {PAYMENT_API_URL} defaults to {url.get('default')!r}, not the manifests' {want_url!r}")
        conditions = [expr(v.get("condition", "")) for v in url.get("validation", [])]
        if not any(f"var.{PAYMENT_API_URL}" in c and "https://" in c for c in conditions):
            problems.append(f"variable {PAYMENT_API_URL} is not validated as an https:// origin")
    secrets = unit.variables.get("secrets")
    want_key = manifest_default(manifests, PAYMENT_API_KEY)
    if secrets is None:
        problems.append(f"{label} has no variable secrets")
    else:
        if secrets.get("sensitive") is not True:
            problems.append("variable secrets is not sensitive")
        attrs = object_attributes(secrets.get("type", ""))
        key_type = attrs.get(PAYMENT_API_KEY)
        if key_type is None:
            problems.append(f"variable secrets lacks {PAYMENT_API_KEY} (the provider's restricted API key): it could never reach the app")
        elif not re.fullmatch(rf'optional\(string,\s*"{re.escape(want_key or "")}"\)', key_type) or want_key is None:
            problems.append(f"variable secrets does not make {PAYMENT_API_KEY} optional with the manifests' default {want_key!r}: {key_type!r}")
    return problems


def check_root(repo: Path, root: Root, manifests, report: Report):
    n = root.name
    module = load_root(repo / "infra/terraform/modules/app-variables")
    schemes = module_schemes(module)
    made = set(module.locals.get("spin_variables") or {})
    need = deployment_variables(manifests)
    all_vars = {k: v for man in manifests.values() for k, v in man.get("variables", {}).items()}
    secret_names = {k for k, v in all_vars.items() if v.get("secret")}

    # module ------------------------------------------------------------------------------
    mods = [m for m, body in root.modules.items() if unq(body.get("source")) == MODULE_SOURCE]
    problems = [] if mods == ["app_variables"] else [f"expected one module \"app_variables\" with source {MODULE_SOURCE}, found {mods}"]
    report.check(f"{n}: calls modules/app-variables", problems)

    secret_map = dict_literal(root, "spin_secret_variables")
    host_map = dict_literal(root, "spin_host_variables")
    public = expr(root.locals.get("spin_public_variables", ""))

    # supplied ----------------------------------------------------------------------------
    problems = []
    if secret_map is None or host_map is None:
        problems.append("locals spin_secret_variables and spin_host_variables must be map literals (what the root delivers)")
        secret_map, host_map = secret_map or {}, host_map or {}
    if not re.fullmatch(r"merge\(module\.app_variables\.settings_variable, local\.spin_host_variables\)", public):
        problems.append(f"local.spin_public_variables must merge module.app_variables.settings_variable and local.spin_host_variables: {public!r}")
    supplied = set(secret_map) | set(host_map)
    for name, why in sorted(need.items()):
        if name not in supplied:
            problems.append(f"{name} is not supplied ({why})")
    for name in sorted(supplied - set(all_vars)):
        problems.append(f"{name} is not a variable of the manifests")
    # What the module makes is delivered, an optional variable too (payment_api_key: without it
    # no buyer gets a checkout).
    for name in sorted(made - supplied - set(need)):
        problems.append(f"{name} is made by modules/app-variables but not delivered")
    report.check(f"{n}: supplies every variable a deployment must set", problems)

    # the payment provider ----------------------------------------------------------------
    problems = payment_input_problems(root, manifests, n)
    call = root.modules.get("app_variables", {})
    if expr(call.get(PAYMENT_API_URL, "")) != f"var.{PAYMENT_API_URL}":
        problems.append(f"module app_variables does not get {PAYMENT_API_URL} = var.{PAYMENT_API_URL}")
    if expr(call.get("secrets", "")) != "var.secrets":
        problems.append("module app_variables does not get secrets = var.secrets")
    if PAYMENT_API_URL not in host_map:
        problems.append(f"{PAYMENT_API_URL} is not delivered in the clear with the hosts (spin_host_variables)")
    if PAYMENT_API_KEY not in secret_map:
        problems.append(f"{PAYMENT_API_KEY} is not delivered as a secret (spin_secret_variables)")
    report.check(f"{n}: the payment provider's API, payment_api_url in the clear, payment_api_key a secret, both through the module", problems)

    # settings ----------------------------------------------------------------------------
    problems = []
    decl = root.variables.get("settings")
    if decl is None:
        problems.append("no variable settings (the app's optional settings, a map)")
    else:
        if expr(decl.get("type", "")) != "map(string)" or decl.get("default") != {}:
            problems.append(f"variable settings is not map(string) with default {{}}: type {decl.get('type')!r}, default {decl.get('default')!r}")
        if decl.get("sensitive") is True:
            problems.append("variable settings is sensitive: the settings are not secret")
        if not any("module.app_variables.setting_patterns" in expr(v.get("condition", "")) for v in decl.get("validation", [])):
            problems.append("variable settings is not validated against module.app_variables.setting_patterns (the module's one list of names)")
    if expr(root.modules.get("app_variables", {}).get("settings", "")) != "var.settings":
        problems.append("module app_variables does not get settings = var.settings")
    want_proxies = ROOT_TRUSTED_PROXIES[root.name]
    got_proxies = root.modules.get("app_variables", {}).get(TRUSTED_PROXIES)
    if (expr(got_proxies) if got_proxies is not None else None) != want_proxies:
        problems.append(f"module app_variables gets {TRUSTED_PROXIES} = {got_proxies!r}, not {want_proxies!r} (the proxies in front of the app)")
    for mname, man in manifests.items():
        sdecl = man.get("variables", {}).get(SETTINGS_VARIABLE)
        if sdecl is None:
            problems.append(f"{mname} declares no variable {SETTINGS_VARIABLE}")
        elif sdecl.get("secret") or sdecl.get("required") or "default" not in sdecl:
            problems.append(f"{SETTINGS_VARIABLE} in {mname} must be optional and non-secret with a default (it is delivered in the clear): {sdecl}")
    for name in sorted(root.variables):
        if name == "spin_variable_overrides" or name.endswith("_overrides"):
            problems.append(f"variable {name}: the app's tuning is the settings input (every other Spin variable the root sets itself)")
    report.check(f"{n}: settings validated, rendered by the module, delivered in the clear", problems)

    # from the module ---------------------------------------------------------------------
    problems = []
    for k, v in secret_map.items():
        if expr(v) == f"module.app_variables.spin_variables.{k}":
            continue
        # An optional secret the module does not make (the scheduler's job_key): it must come
        # from a sensitive variable of the root, directly or through a local of the same name.
        declared = root.variables.get(k, {})
        if k not in need and re.fullmatch(rf"(var|local)\.{k}", expr(v)) and declared.get("sensitive"):
            continue
        problems.append(f"{k} = {expr(v)!r}, not module.app_variables.spin_variables.{k}")
    for k, v in host_map.items():
        if expr(v) != f"module.app_variables.hosts.{k}":
            problems.append(f"{k} = {expr(v)!r}, not module.app_variables.hosts.{k} (the host must come from the endpoints the URL is built from)")
    report.check(f"{n}: connection variables and secrets come from the module", problems)

    # secret ------------------------------------------------------------------------------
    problems = []
    for name in sorted(secret_names):
        # An optional secret (it has a default, like job_key) may be left to its default.
        if name not in secret_map and (name in need or name in supplied):
            problems.append(f"{name} is secret in the manifest but not in spin_secret_variables")
    for name in sorted((set(host_map) | {SETTINGS_VARIABLE}) & secret_names):
        problems.append(f"{name} is secret in the manifest but delivered in the clear")
    if secret_material(root, local_closure(root, root.locals.get("spin_public_variables", ""))):
        problems.append("spin_public_variables carries secret material")
    delivered = {"secret": [], "public": []}
    for mname, body in root.modules.items():
        # A module that renders the variables (the runtime config) delivers them onwards; what
        # it outputs is secret material (SECRET_MODULE_OUTPUTS) that must reach a secret store.
        if mname != "app_variables" and re.search(r"\blocal\.spin_public_variables\b", local_closure(root, body)):
            delivered["public"].append(("module", mname))
    for (rtype, rname), body in root.resources.items():
        closure = local_closure(root, body)
        if re.search(r"<local\.spin_secret_variables>|\blocal\.spin_secret_variables\b|\blocal\.spin_secret_names\b|\bmodule\.runtime_config\.toml\b", closure):
            delivered["secret"].append((rtype, rname))
        if re.search(r"\blocal\.spin_public_variables\b", closure):
            delivered["public"].append((rtype, rname))
        # clear-text sinks
        for path, value in walk(body):
            key = path[-1] if path else ""
            clear = key in CLEAR_SINKS or (rtype in CLEAR_RESOURCES and key != "environment")
            if rtype == "terraform_data" and key not in CLEAR_SINKS:
                clear = False
            if clear:
                found = secret_material(root, local_closure(root, value))
                if found:
                    problems.append(f"{rtype}.{rname} {'.'.join(path)} carries {', '.join(sorted(set(found)))} in the clear")
    sinks = [r for r in delivered["secret"] if r[0] in SECRET_SINK_TYPES]
    if not sinks:
        problems.append(f"no secret store delivers spin_secret_variables (resources referring to them: {delivered['secret']})")
    if not delivered["public"]:
        problems.append("nothing delivers spin_public_variables")
    names = root.locals.get("spin_secret_names")
    if names is not None and sorted(unq(x) for x in names) != sorted(secret_map):
        problems.append(f"spin_secret_names {sorted(unq(x) for x in names)} differs from spin_secret_variables {sorted(secret_map)}")
    report.check(f"{n}: secrets travel only through a secret store", problems)

    # sensitive ---------------------------------------------------------------------------
    problems = []
    for name, body in root.variables.items():
        if SECRETISH_INPUT.search(name) and body.get("sensitive") is not True:
            problems.append(f"variable {name} holds a secret but is not sensitive")
    for name, body in root.outputs.items():
        found = secret_material(root, local_closure(root, body.get("value")))
        if found and body.get("sensitive") is not True:
            problems.append(f"output {name} carries {', '.join(sorted(set(found)))} but is not sensitive")
    call = root.modules.get("app_variables", {})
    for arg in ("redis_password", "redis_passwords", "postgres_password", "secrets"):
        for v in re.findall(r"\bvar\.(\w+)", refs_of(call.get(arg, ""))):
            if root.variables.get(v, {}).get("sensitive") is not True:
                problems.append(f"module argument {arg} comes from var.{v}, which is not sensitive")
    report.check(f"{n}: inputs and outputs holding secrets are sensitive", problems)

    # hosts -------------------------------------------------------------------------------
    problems = []
    port = SAMPLE_PORT[n]
    api_url = unq(var_default(root, PAYMENT_API_URL)) or manifest_default(manifests, PAYMENT_API_URL) or "https://api.stripe.com"
    for family, tmpl in SAMPLE_NODES[n].items():
        one = simulate(n, [tmpl.format(i=0)], port, None, schemes, api_url)
        problems += hosts_problems(manifests, one, f"one {family} node")
        patterns = host_patterns(root)
        if n == "spinkube":
            continue  # the operator gives the pattern for several nodes
        nodes = [tmpl.format(i=i) for i in range(3)]
        fits = [p for p in patterns if not hosts_problems(manifests, simulate(n, nodes, port, p, schemes, api_url), "")]
        if not fits:
            problems.append(f"three {family} nodes: none of the root's host patterns {patterns} lets every component reach them all")
    report.check(f"{n}: redis_origin / pg_host / payment_api_url match allowed_outbound_hosts of both manifests", problems)


def walk(value, path=()):
    """(path, leaf-ish value) pairs: every attribute with its key path."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*path, k), v
            yield from walk(v, (*path, k))
    elif isinstance(value, list):
        for v in value:
            yield from walk(v, path)


# ---------------------------------------------------------------------------------------------
# Spin's settings: what real Spin pays per request for them
# ---------------------------------------------------------------------------------------------
#
# Sources (spinframework/spin, Spin 3.6): crates/trigger/src/cli.rs (`--log-dir ""` unsets the
# log directory; `--runtime-config-file`), crates/trigger/src/cli/stdio.rs (with a log directory,
# two files opened per instance), crates/runtime-config/src/variables.rs (runtime-config
# providers first, the environment provider appended last; `type = "static"`),
# crates/variables-env/src/lib.rs (each environment lookup is a `block_in_place`),
# crates/factor-outbound-networking/src/lib.rs (every app variable resolved on an instance's
# first outbound connection). containerd-shim-spin src/trigger.rs: the shim never logs to files
# and loads /runtime-config.toml, which spin-operator mounts from runtimeConfig.loadFromSecret.

BACKTRACE_SET = re.compile(r"""RUST_(?:LIB_)?BACKTRACE["']?[ \t]*[=:][ \t]*["']?([^"'\s;:,)}]*)""")
SPIN_UP = re.compile(r"""(?:^|[;&|]\s*|\$\(\s*)(?:exec\s+)?(?:env\s+(?:-u\s*\S+\s+|-\S+\s+|\w+=\S*\s+)*|(?:\w+=\S*\s+)*)spin up\b""")
LOG_DIR_EMPTY = re.compile(r"""(?:--log-dir|-L)(?:=|\s+)(?:""|'')(?=\s|$)""")
RUNTIME_CONFIG_ARG = re.compile(r"""--runtime-config-file(?:=|\s+)\S+""")
STATIC_PROVIDER = re.compile(r"""\[\[(?:variables|config)_provider\]\][\s\S]{0,200}?type\s*=\s*\\?"static\\?\"""")
LOG_DIR_IN_CONFIG = re.compile(r"""(?m)^\s*log_dir\s*=\s*"([^"]+)\"""")
WRITER = "infra/terraform/files/spin-runtime-config.sh"
RUNTIME_CONFIG_MODULE = "../modules/spin-runtime-config"


def deployed_text(root: Path, tf_text: str) -> dict:
    """The root's .tf text and every file it ships: each "${path.module}/..." it names (read with
    file() or templatefile(), directly or through a map of paths)."""
    texts = {"*.tf": tf_text}
    for rel in sorted(set(re.findall(r'"\$\{path\.module\}/([^"$]+)"', tf_text))):
        f = (root / rel).resolve()
        texts[rel] = f.read_text() if f.is_file() else ""
    return texts


# The AWS boot script's branches: `%{ if runtime == "x" ~}` ... [`%{ else ~}` ...] `%{ endif ~}`,
# each directive alone on its line (`~}` strips the newline after it), not nested.
TEMPLATE_IF = re.compile(r'%\{ if runtime == "([\w-]+)" ~\}\n(.*?)(?:%\{ else ~\}\n(.*?))?%\{ endif ~\}\n?', re.S)
RUNTIMES = ("spin", "seckill-host")
# What the AWS root ships for its "seckill-host" runtime only.
HOST_ONLY = ("seckill-host.service", "host-prestart.sh")
HOST_UNIT = "infra/terraform/files/seckill-host.service"


def render_runtime(text: str, runtime: str) -> str:
    """A boot template as Terraform renders it for one runtime (the branches; `$${` is `${`)."""
    text = TEMPLATE_IF.sub(lambda m: m.group(2) if m.group(1) == runtime else (m.group(3) or ""), text)
    return text.replace("$${", "${").replace("%%{", "%{")


def spin_texts(texts: dict) -> dict:
    """What the "spin" runtime's instances get: the templates rendered for it, the host's files out."""
    return {rel: render_runtime(t, "spin") if rel.endswith(".tftpl") else t
            for rel, t in texts.items() if Path(rel).name not in HOST_ONLY}


def shell_commands(text: str) -> list:
    """Non-comment lines with `\\`-continuations joined."""
    lines, cur = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not cur and stripped.startswith("#"):
            continue
        cur += stripped[:-1] + " " if stripped.endswith("\\") else stripped
        if not stripped.endswith("\\"):
            lines.append(cur)
            cur = ""
    return lines + ([cur] if cur else [])


def spin_up_commands(text: str) -> list:
    """Commands that run `spin up` (at a command's start, after exec, env or assignments)."""
    return [c for c in shell_commands(text) if SPIN_UP.search(c)]


def uncommented(text: str) -> str:
    """The text without comment lines (# or //): a comment sets nothing."""
    return "\n".join(line for line in text.splitlines() if not re.match(r"\s*(#|//)", line))


def backtrace_problems(texts: dict, parsed=None) -> list:
    problems = []
    for where, text in texts.items():
        for m in BACKTRACE_SET.finditer(uncommented(text)):
            if m.group(1) != "0":
                problems.append(f"{where} sets {m.group(0).strip()!r}: a backtrace is captured for every error Spin builds per request (2-6 % of its CPU); leave it unset or 0")
    for path, value in walk(parsed or {}):
        if isinstance(value, dict) and unq(value.get("name")) in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE") and unq(value.get("value")) != "0":
            problems.append(f"{'.'.join(path)} sets {unq(value.get('name'))} = {unq(value.get('value'))!r}")
    return problems


def spin_up_problems(where: str, commands: list) -> list:
    problems = []
    for c in commands:
        if not LOG_DIR_EMPTY.search(c):
            problems.append(f'{where}: `{c}` lacks --log-dir "": Spin would open two log files per request (crates/trigger/src/cli/stdio.rs)')
        if not RUNTIME_CONFIG_ARG.search(c):
            problems.append(f"{where}: `{c}` lacks --runtime-config-file: every variable lookup would go through the environment provider's block_in_place")
    return problems


def check_spin_settings(repo: Path, root: Root, report: Report):
    n = root.name
    texts = deployed_text(root.path, root.text)
    parsed = {"resource": {f"{t}.{r}": b for (t, r), b in root.resources.items()}, "locals": root.locals, "module": root.modules}
    problems = backtrace_problems(texts, parsed)
    joined = "\n".join(texts.values())
    for m in LOG_DIR_IN_CONFIG.finditer(joined):
        problems.append(f"a runtime config sets log_dir = {m.group(1)!r}: component output would go to files opened per request")

    if n == "aws":
        # Spin's rules on what the "spin" runtime ships (the host's unit would mask a missing
        # UnsetEnvironment= here); the host's own checks are check_host_runtime's.
        spin = spin_texts(texts)
        joined = "\n".join(spin.values())
        commands = [c for where, t in spin.items() for c in spin_up_commands(t)]
        if not commands:
            problems.append("no `spin up` command found in the root or the files it ships")
        problems += spin_up_problems("aws", commands)
        if not STATIC_PROVIDER.search(joined):
            problems.append('the runtime config it writes has no [[variables_provider]] with type = "static"')
        if not re.search(r"(?m)^UnsetEnvironment=.*\bRUST_BACKTRACE\b|\bunset\s+(?:[A-Z_]+\s+)*RUST_BACKTRACE\b|\benv\s+-u\s*RUST_BACKTRACE\b", joined):
            problems.append("RUST_BACKTRACE is not explicitly unset (UnsetEnvironment= in the unit, or unset before exec): a base image or the manager's environment may set it")
        if not re.search(r"RUST_LIB_BACKTRACE=0\b", joined):
            problems.append("RUST_LIB_BACKTRACE=0 is not set: errors capture backtraces whenever RUST_BACKTRACE is set")
        if not re.search(r"\bumask 0?077\b|\bchmod 0?600\b", joined):
            problems.append("the runtime config (it holds the secrets) is not written with umask 077 / mode 0600")

    elif n == "spinkube":
        spinapps = [b for (t, _), b in root.resources.items() if t == "kubernetes_manifest" and unq(b.get("manifest", {}).get("kind")) == "SpinApp"]
        if not spinapps:
            problems.append("no SpinApp kubernetes_manifest")
        for app in spinapps:  # the app and its critical routes' SpinApp: each loads the runtime config
            spec = app.get("manifest", {}).get("spec", {})
            lfs = expr((spec.get("runtimeConfig") or {}).get("loadFromSecret", ""))
            m = re.fullmatch(r"(kubernetes_secret_v1|kubernetes_secret)\.(\w+)\.metadata\[0\]\.name", lfs or "")
            if not m:
                problems.append(f"the SpinApp has no runtimeConfig.loadFromSecret naming a Secret of this root ({lfs!r}): Spin would resolve every variable through its environment provider")
                continue
            data = root.resources.get((m.group(1), m.group(2)), {}).get("data", "")
            data_text = local_closure(root, data)
            if "runtime-config.toml" not in data_text:
                problems.append(f"Secret {m.group(2)} has no key runtime-config.toml (what loadFromSecret mounts at /runtime-config.toml)")
            if not re.search(r"\bmodule\.runtime_config\.toml\b", data_text):
                problems.append(f"Secret {m.group(2)}'s runtime-config.toml does not come from module.runtime_config")
        mod = root.modules.get("runtime_config")
        if not mod or unq(mod.get("source")) != RUNTIME_CONFIG_MODULE:
            problems.append(f'no module "runtime_config" with source {RUNTIME_CONFIG_MODULE}')
        else:
            values = local_closure(root, mod.get("values", ""))
            if not (re.search(r"\blocal\.spin_secret_variables\b", values) and re.search(r"\blocal\.spin_public_variables\b", values)):
                problems.append("module runtime_config's values are not spin_public_variables and spin_secret_variables")
            mod_text = "".join(f.read_text() for f in sorted((root.path / RUNTIME_CONFIG_MODULE).glob("*.tf")))
            if not STATIC_PROVIDER.search(mod_text):
                problems.append('modules/spin-runtime-config renders no [[variables_provider]] with type = "static"')
    report.check(f"{n}: Spin's settings: no RUST_BACKTRACE, no per-request log files, a static variables provider", problems)


def unit_values(text: str, key: str) -> list:
    """The values of a systemd setting (`Key=value` lines; a drop-in's lines included)."""
    return [m.group(1).strip() for m in re.finditer(rf"(?m)^{key}=(.*)$", uncommented(text))]


ALERT_RULES = "infra/prometheus/seckill.rules.yml"


def check_alert_rules(repo: Path, root: Root, report: Report):
    """The SpinKube root's PrometheusRule: the rules file's groups as they are, behind a switch
    that is off by default (the kind exists only where the Prometheus operator's CRDs do)."""
    problems = []
    rules = [(name, b) for (t, name), b in root.resources.items()
             if t == "kubernetes_manifest" and unq(b.get("manifest", {}).get("kind")) == "PrometheusRule"]
    if len(rules) != 1:
        problems.append(f"expected one PrometheusRule kubernetes_manifest, found {len(rules)}")
    for name, body in rules:
        manifest = body.get("manifest", {})
        if unq(manifest.get("apiVersion")) != "monitoring.coreos.com/v1":
            problems.append(f"{name}: apiVersion {manifest.get('apiVersion')!r}, not monitoring.coreos.com/v1")
        if not re.fullmatch(r"kubernetes_namespace_v1\.\w+\.metadata\[0\]\.name", expr(manifest.get("metadata", {}).get("namespace", ""))):
            problems.append(f"{name}: not in the root's namespace")
        switch = re.fullmatch(r"var\.(\w+) \? 1 : 0", expr(body.get("count", "")))
        if not switch:
            problems.append(f"{name}: count is not `var.X ? 1 : 0` (a switch): {body.get('count')!r}")
        elif root.variables.get(switch.group(1), {}).get("default") is not False:
            problems.append(f"{name}: var.{switch.group(1)} does not default to false (without the operator's CRDs the plan fails)")
        groups = expr((manifest.get("spec") or {}).get("groups", ""))
        m = re.fullmatch(r'yamldecode\(file\("\$\{path\.module\}/([^"]+)"\)\)\.groups', groups)
        target = (root.path / m.group(1)).resolve() if m else None
        if target is None or target != (repo / ALERT_RULES).resolve():
            problems.append(f"{name}: spec.groups is not yamldecode(file(...)).groups of {ALERT_RULES}: {groups!r}")
        elif not re.search(r"(?m)^groups:", target.read_text()):
            problems.append(f"{ALERT_RULES} has no top-level groups:")
    report.check(f"{root.name}: the alerts of {ALERT_RULES} as a PrometheusRule, off by default", problems)


DASHBOARD = "infra/grafana/seckill.dashboard.json"


def check_dashboard(repo: Path, root: Root, report: Report):
    """The SpinKube root's Grafana dashboard: the dashboard file as it is, in a ConfigMap of the
    root's namespace that carries the label Grafana's sidecar selects, on by default (a plain
    ConfigMap needs nothing else in the cluster)."""
    problems = []
    maps = [(name, b) for (t, name), b in root.resources.items()
            if t == "kubernetes_config_map_v1" and "dashboard.json" in str(b.get("data", ""))]
    if len(maps) != 1:
        problems.append(f"expected one kubernetes_config_map_v1 whose data is the Grafana dashboard, found {len(maps)}")
    for name, body in maps:
        meta = body.get("metadata", {})
        if isinstance(meta, list):
            meta = meta[0] if meta else {}
        if not re.fullmatch(r"kubernetes_namespace_v1\.\w+\.metadata\[0\]\.name", expr(meta.get("namespace", ""))):
            problems.append(f"{name}: not in the root's namespace")
        labels = re.fullmatch(r"var\.(\w+)", expr(meta.get("labels", "")))
        default = root.variables.get(labels.group(1), {}).get("default") if labels else None
        if not isinstance(default, dict) or unq(default.get("grafana_dashboard")) != "1":
            problems.append(f"{name}: its labels do not default to grafana_dashboard = \"1\" (the sidecar's label)")
        switch = re.fullmatch(r"var\.(\w+) \? 1 : 0", expr(body.get("count", "")))
        if switch and root.variables.get(switch.group(1), {}).get("default") is not True:
            problems.append(f"{name}: var.{switch.group(1)} does not default to true")
        files = re.findall(r'file\("\$\{path\.module\}/([^"]+)"\)', str(body.get("data", "")))
        if [(root.path / f).resolve() for f in files] != [(repo / DASHBOARD).resolve()]:
            problems.append(f"{name}: data is not file(...) of {DASHBOARD}: {files}")
    report.check(f"{root.name}: the Grafana dashboard of {DASHBOARD} as a ConfigMap for Grafana's sidecar", problems)


def check_host_runtime(repo: Path, root: Root, report: Report):
    """The AWS root's runtime = "seckill-host": our host, not Spin, fed as Spin is."""
    problems = []
    decl = root.variables.get("runtime")
    if decl is None:
        problems.append('no variable runtime ("spin" | "seckill-host")')
        report.check("aws: runtime = \"seckill-host\" runs files/seckill-host.service with the variables Spin gets", problems)
        return
    if unq(decl.get("default")) != "spin":
        problems.append(f"variable runtime defaults to {decl.get('default')!r}, not \"spin\" (the reference runtime)")
    conditions = " ".join(expr(v.get("condition", "")) for v in decl.get("validation", []))
    if not all(f'"{r}"' in conditions for r in RUNTIMES) or "var.runtime" not in conditions:
        problems.append(f"variable runtime is not validated against {RUNTIMES}: {conditions!r}")

    texts = deployed_text(root.path, root.text)
    unit_rel = next((rel for rel in texts if Path(rel).name == Path(HOST_UNIT).name), None)
    templates = {rel: t for rel, t in texts.items() if "%{ if runtime" in t}
    if unit_rel is None:
        problems.append(f"the root does not ship {HOST_UNIT}")
    if not templates:
        problems.append("no boot template with a branch per runtime")
    unit = texts.get(unit_rel, "")
    boot = "\n".join(render_runtime(t, "seckill-host") for t in templates.values())
    prestart = "\n".join(t for rel, t in texts.items() if Path(rel).name == "host-prestart.sh")

    if spin_up_commands(boot) or re.search(r"\bspin plugins install\b", boot):
        problems.append("the seckill-host boot still installs or runs Spin")
    if not re.search(rf"\bsystemctl enable --now {re.escape(Path(HOST_UNIT).name)}\b", boot):
        problems.append(f"the seckill-host boot does not enable {Path(HOST_UNIT).name}")
    exec_start = next((c for c in shell_commands(unit) if c.startswith("ExecStart=")), "")
    if not re.search(r"/seckill-host\b.*\bup\b.*--manifest\s+\S*/spin\.toml\b", exec_start):
        problems.append(f"{HOST_UNIT}: ExecStart is not `seckill-host ... up --manifest .../spin.toml` (the manifest Spin runs): {exec_start!r}")
    if not any(re.search(r"\bRUST_BACKTRACE\b", v) for v in unit_values(unit, "UnsetEnvironment")):
        problems.append(f"{HOST_UNIT} does not unset RUST_BACKTRACE (UnsetEnvironment=): wasmtime would capture a backtrace per request error")
    if "RUST_LIB_BACKTRACE=0" not in unit_values(unit, "Environment"):
        problems.append(f"{HOST_UNIT} does not set Environment=RUST_LIB_BACKTRACE=0")

    # The environment files: what the unit and the drop-in read must be what the boot writes.
    reads = {v.lstrip("-") for v in unit_values(unit, "EnvironmentFile") + unit_values(boot, "EnvironmentFile")}
    writes = set(re.findall(r"cat >(/etc/seckill/boot\.env) <<", root.text))
    runtime_dirs = unit_values(boot, "RuntimeDirectory") + unit_values(unit, "RuntimeDirectory")
    m = re.search(r"(?m)^out=\$\{RUNTIME_DIRECTORY[^}]*\}/(\S+)$", prestart)
    if not m or not runtime_dirs:
        problems.append("host-prestart.sh does not write the secrets into the service's RuntimeDirectory= (a tmpfs)")
    else:
        writes.add(f"/run/{runtime_dirs[-1]}/{m.group(1)}")
    if "/etc/seckill/boot.env" not in writes:
        problems.append("app.tf no longer writes /etc/seckill/boot.env")
    for path in sorted(writes - reads):
        problems.append(f"the boot writes {path} but neither {HOST_UNIT} nor its drop-in reads it (EnvironmentFile=)")
    if not any(v.endswith("/host-prestart") for v in unit_values(boot, "ExecStartPre")):
        problems.append("the drop-in does not run host-prestart (secrets and migrations) as ExecStartPre=")
    if not re.search(r"secretsmanager get-secret-value", prestart) or not re.search(r"/opt/seckill/bin/migrate\b", prestart):
        problems.append("host-prestart.sh does not read the secrets from Secrets Manager and migrate")
    report.check("aws: runtime = \"seckill-host\" runs files/seckill-host.service with the variables Spin gets", problems)


# ---------------------------------------------------------------------------------------------
# Request classes: the SpinKube root gives the critical routes a SpinApp of their own and routes
# them there
# ---------------------------------------------------------------------------------------------
#
# The classes come from spin.http.toml's [application.tool.seckill.request_classes], read here
# with tomllib (a class, or one per method with "*" for the rest; HEAD falls back to GET). The
# root's HTTPRoutes take their matches from modules/request-classes (provider-free), which this
# check evaluates with terraform (init and apply of a configuration holding only that module) and
# then sends every route's sample paths with every method through all the HTTPRoutes' rules, in
# Envoy Gateway's order (envoyproxy/gateway internal/gatewayapi/sort.go: Exact, then
# RegularExpression, then PathPrefix, each longest first, then the most header matches, a method
# match counting as one; a rule without matches is PathPrefix "/"). Every critical pair must reach
# the critical SpinApp's Service and every other request the app's.

REQUEST_CLASSES_MODULE = "../modules/request-classes"
CLASS_NAMES = ("critical", "sale", "entry", "read")
# "PURGE" stands for the methods a route's entry does not name.
PROBE_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PURGE")
PATH_RANK = {"Exact": 3, "RegularExpression": 2, "PathPrefix": 1}
_MODULE_OUTPUTS: dict = {}


def manifest_classes(man) -> tuple:
    """(routes, route -> {method or "*": class}, problems) from a parsed manifest."""
    routes = [t["route"] for t in man.get("trigger", {}).get("http", []) if isinstance(t.get("route"), str)]
    table = man.get("application", {}).get("tool", {}).get("seckill", {}).get("request_classes")
    problems, classes = [], {}
    if not isinstance(table, dict):
        return routes, classes, ["no [application.tool.seckill.request_classes] table"]
    for r in routes:
        entry = table.get(r)
        if entry is None:
            problems.append(f"route {r} has no request class")
            continue
        if not isinstance(entry, (str, dict)):
            problems.append(f"route {r}: {entry!r} is neither a class nor a table by method")
            continue
        by_method = {"*": entry} if isinstance(entry, str) else dict(entry)
        if "*" not in by_method:
            problems.append(f"route {r}: a class by method without \"*\"")
        bad = sorted({c for c in by_method.values() if c not in CLASS_NAMES})
        if bad:
            problems.append(f"route {r}: unknown classes {bad}")
        classes[r] = by_method
    problems += [f"{r} has a class but is no route" for r in sorted(set(table) - set(routes))]
    return routes, classes, problems


def class_of(by_method: dict, method: str) -> str:
    if method in by_method:
        return by_method[method]
    if method == "HEAD" and "GET" in by_method:
        return by_method["GET"]
    return by_method.get("*", "none")


def route_samples(route: str) -> list:
    """Paths a Spin route serves: each `:param` filled in; a trailing `/...` or `/*` as its
    prefix and one subpath."""
    wild = route.endswith("/...") or route.endswith("/*")
    base = route.rsplit("/", 1)[0] if wild else route
    filled = "/".join(f"{g[1:]}1" if g.startswith(":") else g for g in base.split("/"))
    return [filled or "/", f"{filled}/x/y"] if wild else [filled]


def gateway_matches(m: dict, path: str, method: str) -> bool:
    kind, value = m.get("path", {}).get("type", "PathPrefix"), m.get("path", {}).get("value", "/")
    if m.get("method") not in (None, method):
        return False
    if kind == "Exact":
        return path == value
    if kind == "RegularExpression":
        return re.fullmatch(value, path) is not None
    return value == "/" or path == value.rstrip("/") or path.startswith(value.rstrip("/") + "/")


def literal(value):
    """A parsed HCL literal with python-hcl2's quotes stripped (None where an expression is)."""
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    if isinstance(value, str):
        text = unq(value)
        return None if text.startswith("${") else text
    return value


def evaluate_request_classes(module_dir: Path, manifest: Path):
    """modules/request-classes' gateway outputs for this manifest, evaluated by terraform:
    ({output: value}, None), or (None, why not). Cached by the module's and manifest's text."""
    texts = [f.read_text() for f in sorted(module_dir.glob("*.tf"))] + [manifest.read_text()]
    key = json.dumps(texts)
    if key in _MODULE_OUTPUTS:
        return _MODULE_OUTPUTS[key]
    terraform = shutil.which("terraform")
    if terraform is None:
        return None, "terraform not found"
    with tempfile.TemporaryDirectory(prefix="request-classes.") as tmp:
        Path(tmp, "main.tf").write_text(
            f'module "rc" {{\n  source   = {json.dumps(str(module_dir))}\n  manifest = file({json.dumps(str(manifest))})\n}}\n'
            'output "gateway" {\n  value = { main = module.rc.gateway_main_matches, critical = module.rc.gateway_critical_matches }\n}\n')
        env = {**os.environ, "TF_DATA_DIR": str(Path(tmp, ".terraform")), "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}
        result = None
        for args in (["init", "-backend=false", "-input=false", "-no-color"], ["apply", "-auto-approve", "-input=false", "-no-color"], ["output", "-json", "-no-color"]):
            run = subprocess.run([terraform, f"-chdir={tmp}", *args], env=env, capture_output=True, text=True)
            if run.returncode != 0:
                why = " ".join(re.sub(r"[│╷╵]", " ", run.stderr).split())
                result = (None, f"terraform {args[0]} of modules/request-classes on {manifest.name} failed: {why}")
                break
        else:
            result = (json.loads(run.stdout)["gateway"]["value"], None)
    _MODULE_OUTPUTS[key] = result
    return result


def check_critical_routes(repo: Path, root: Root, manifests, report: Report):
    """The SpinKube root: the critical routes' SpinApp (same image and runtime config as the app,
    requests = limits, replicas from a validated variable), the ticker calling it, and the
    HTTPRoutes sending every critical pair of spin.http.toml to it and nothing else."""
    title = "spinkube: the critical routes in a SpinApp of their own (reserved capacity), called by the ticker, every critical pair routed to it"
    problems = []
    apps = {n: b.get("manifest", {}) for (t, n), b in root.resources.items()
            if t == "kubernetes_manifest" and unq(b.get("manifest", {}).get("kind")) == "SpinApp"}
    main, crit = apps.get("spinapp"), apps.get("spinapp_critical")
    if main is None or crit is None:
        report.check(title, ["expected the SpinApps kubernetes_manifest.spinapp (the app) and kubernetes_manifest.spinapp_critical (its critical routes)"])
        return
    main_name, crit_name = (expr(a.get("metadata", {}).get("name", "")) for a in (main, crit))
    mspec, cspec = main.get("spec", {}), crit.get("spec", {})
    for key in ("image", "executor", "runtimeConfig", "podAnnotations"):
        if json.dumps(cspec.get(key)) != json.dumps(mspec.get(key)):
            problems.append(f"the critical SpinApp's {key} {cspec.get(key)!r} is not the app's {mspec.get(key)!r}")
    resources = cspec.get("resources") or {}
    limits, requests = resources.get("limits"), resources.get("requests")
    if limits is None or json.dumps(limits) != json.dumps(requests):
        problems.append(f"the critical SpinApp's requests are not its limits (reserved capacity, Guaranteed QoS): {resources!r}")
    else:
        m = re.fullmatch(r"var\.(\w+)", expr(limits)) if not isinstance(limits, dict) else None
        fields = set(limits) if isinstance(limits, dict) else set(re.findall(r"\b(cpu|memory)\b", json.dumps(root.variables.get(m.group(1), {}).get("type", "")))) if m else set()
        if not {"cpu", "memory"} <= fields:
            problems.append(f"the critical SpinApp's resources do not set both cpu and memory: {limits!r}")
    replicas = re.fullmatch(r"var\.(\w+)", expr(cspec.get("replicas", "")))
    if not replicas or not any(">= 1" in expr(v.get("condition", "")) for v in root.variables.get(replicas.group(1), {}).get("validation", [])):
        problems.append(f"the critical SpinApp's replicas {cspec.get('replicas')!r} is not a variable validated to at least 1")

    # The ticker calls the job routes (critical) on the critical SpinApp's Service.
    def env_values(value, name):
        if isinstance(value, dict):
            if unq(value.get("name")) == name and "value" in value:
                yield value["value"]
            for v in value.values():
                yield from env_values(v, name)
        elif isinstance(value, list):
            for v in value:
                yield from env_values(v, name)
    urls = [local_closure(root, v) for (t, _), b in root.resources.items() if t.startswith("kubernetes_deployment") for v in env_values(b, "APP_URL")]
    if not urls or not all(crit_name in u for u in urls):
        problems.append(f"the ticker's APP_URL is not the critical SpinApp's Service ({crit_name}): {urls}")

    # The HTTPRoutes' rules, each with its backend (the app or the critical app) and matches.
    mod = root.modules.get("request_classes", {})
    if unq(mod.get("source")) != REQUEST_CLASSES_MODULE or expr(mod.get("manifest", "")) != "file(local.manifest_file)":
        problems.append(f'no module "request_classes" with source {REQUEST_CLASSES_MODULE} reading the image\'s manifest (file(local.manifest_file))')
    rules = []
    for (t, n), b in root.resources.items():
        manifest = b.get("manifest", {})
        if t != "kubernetes_manifest" or unq(manifest.get("kind")) != "HTTPRoute":
            continue
        if unq(manifest.get("apiVersion")) != "gateway.networking.k8s.io/v1":
            problems.append(f"HTTPRoute {n}: apiVersion {manifest.get('apiVersion')!r}, not gateway.networking.k8s.io/v1")
        for i, rule in enumerate((manifest.get("spec") or {}).get("rules") or []):
            names = {expr(ref.get("name", "")) for ref in rule.get("backendRefs") or []}
            target = {frozenset([main_name]): "main", frozenset([crit_name]): "critical"}.get(frozenset(names))
            if target is None:
                problems.append(f"HTTPRoute {n} rule {i}: backendRefs {sorted(names)} are neither the app's Service ({main_name}) nor the critical one's ({crit_name})")
                continue
            matches = rule.get("matches", [])
            out = re.fullmatch(r"module\.request_classes\.(\w+)", expr(matches)) if not isinstance(matches, list) else None
            rules.append((n, i, target, out.group(1) if out else literal(matches)))
    if not rules:
        problems.append("no HTTPRoute sends requests to the SpinApps")
    routes, classes, table_problems = manifest_classes(manifests["spin.http.toml"])
    problems += [f"spin.http.toml: {p}" for p in table_problems]

    outputs, why = evaluate_request_classes(root.path.parent / "modules/request-classes", root.path.parents[2] / "spin.http.toml")
    if outputs is None and why == "terraform not found" and os.environ.get("CI") != "true":
        print("skip spinkube: the HTTPRoutes' matches (modules/request-classes) are not evaluated: terraform not found")
    elif outputs is None:
        problems.append(why)
    else:
        names = {"gateway_main_matches": "main", "gateway_critical_matches": "critical"}
        resolved = []
        for n, i, target, matches in rules:
            if isinstance(matches, str):
                if matches not in names:
                    problems.append(f"HTTPRoute {n} rule {i}: matches module.request_classes.{matches}, not gateway_main_matches or gateway_critical_matches")
                    continue
                matches = outputs[names[matches]]
            if not isinstance(matches, list) or any(m is None for m in matches):
                problems.append(f"HTTPRoute {n} rule {i}: matches are neither a module.request_classes output nor a literal list")
                continue
            if target == "critical" and not matches:
                problems.append(f"HTTPRoute {n} rule {i}: no matches, so every path, to the critical app")
            resolved += [(target, m) for m in (matches or [{"path": {"type": "PathPrefix", "value": "/"}}])]
        for r in routes:
            if r not in classes:
                continue
            for path in route_samples(r):
                for method in PROBE_METHODS:
                    want = "critical" if class_of(classes[r], method) == "critical" else "main"
                    hits = sorted(((PATH_RANK.get(m.get("path", {}).get("type"), 0), len(m.get("path", {}).get("value", "")), int("method" in m)), target)
                                  for target, m in resolved if gateway_matches(m, path, method))
                    if not hits:
                        problems.append(f"{method} {path} ({r}) matches no HTTPRoute rule")
                        continue
                    best = [t for rank, t in hits if rank == hits[-1][0]]
                    if len(set(best)) > 1:
                        problems.append(f"{method} {path} ({r}) matches rules of both apps with the same rank")
                    elif best[0] != want:
                        problems.append(f"{method} {path} ({r}, {class_of(classes[r], method)}) reaches the {best[0]} app, not the {want} one")
    report.check(title, problems)


def check_deploy_guide(repo: Path, report: Report):
    guide = repo / "infra/terraform/DEPLOY.md"
    text = guide.read_text() if guide.is_file() else ""
    blocks = re.findall(r"(?ms)^```[\w-]*\n(.*?)^```", text)  # any fence: an hcl block must not shift the pairs
    problems = backtrace_problems({f"DEPLOY.md code block {i + 1}": b for i, b in enumerate(blocks)})
    commands = [c for b in blocks for c in spin_up_commands(b)]
    if not commands:
        problems.append("DEPLOY.md shows no `spin up` command")
    problems += spin_up_problems("DEPLOY.md", commands)
    if "spin-runtime-config.sh" not in "\n".join(blocks):
        problems.append("DEPLOY.md's self-hosted commands do not write the runtime config (files/spin-runtime-config.sh)")
    report.check("DEPLOY.md: spin up with --log-dir \"\" and a static-provider runtime config, no RUST_BACKTRACE", problems)


def check_runtime_config_writer(repo: Path, manifests, report: Report):
    """Runs files/spin-runtime-config.sh on both manifests and reads what it wrote."""
    writer = repo / WRITER
    problems = []
    if not writer.is_file():
        report.check("files/spin-runtime-config.sh: a static provider with every variable, mode 0600", [f"{WRITER} is missing"])
        return
    for mname, man in manifests.items():
        declared = man.get("variables", {})
        given = {name: f'v"al\\ue {name} <&>' for name, d in declared.items() if d.get("required") or d.get("secret")}
        overridden = next((k for k, d in declared.items() if "default" in d and not d.get("secret")), None)
        if overridden:
            given[overridden] = "override"
        if SETTINGS_VARIABLE in declared:
            given[SETTINGS_VARIABLE] = "drain_batch=1000,release_batch=500"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **{f"SPIN_VARIABLE_{k.upper()}": v for k, v in given.items()}}
        with tempfile.TemporaryDirectory(prefix="runtime-config.") as tmp:
            out = Path(tmp) / "runtime-config.toml"
            run = subprocess.run(["sh", str(writer), str(repo / mname), str(out)], env=env, capture_output=True, text=True)
            if run.returncode != 0 or not out.is_file():
                problems.append(f"{mname}: the writer failed ({run.returncode}): {run.stderr.strip()}")
                continue
            mode = stat.S_IMODE(out.stat().st_mode)
            if mode != 0o600:
                problems.append(f"{mname}: written with mode {mode:o}, not 600 (it holds the secrets)")
            try:
                config = tomllib.loads(out.read_text())
            except tomllib.TOMLDecodeError as e:
                problems.append(f"{mname}: the runtime config is not TOML: {e}")
                continue
        providers = config.get("variables_provider", [])
        if [p.get("type") for p in providers] != ["static"]:
            problems.append(f"{mname}: providers {[p.get('type') for p in providers]}, expected one static provider")
            continue
        values = providers[0].get("values", {})
        for name, decl in declared.items():
            want = given.get(name, decl.get("default"))
            if values.get(name) != want:
                problems.append(f"{mname}: {name} = {values.get(name)!r}, expected {want!r} (the environment's value, else the default)")
    report.check("files/spin-runtime-config.sh: a static provider with every variable, mode 0600", problems)


def check_manifest_defaults(manifests, report: Report):
    """Each manifest on its own defaults (the local stack): its allowed_outbound_hosts admit its
    default redis_url and pg_url, and its redis_origin carries redis_url's scheme."""
    problems = []
    for mname, man in manifests.items():
        values = {k: str(d["default"]) for k, d in man.get("variables", {}).items() if "default" in d}
        missing = [k for k in ("redis_url", "redis_origin", "pg_url", "pg_host") if k not in values]
        if missing:
            problems.append(f"{mname}: no default for {', '.join(missing)}")
            continue
        problems += hosts_problems({mname: man}, values, f"{mname} defaults")
    report.check("manifests: on their defaults, allowed_outbound_hosts admit the default URLs", problems)


# ---------------------------------------------------------------------------------------------
# References: every var.X, local.X, module.X, data.T.N and resource T.N a root or module uses is
# declared there (terraform validate says so too, but only the AWS root can be initialised here)
# ---------------------------------------------------------------------------------------------

HEREDOC = re.compile(r"<<-?([A-Za-z_]\w*)\n")


def expressions(text: str) -> str:
    """A .tf file as its expressions only: comments dropped, the literal text of strings and
    heredocs blanked, their ${...} and %{...} interpolations kept (where references can be)."""
    out = []

    def code(i: int, inside: bool) -> int:
        """From i to the `}` closing an interpolation (inside) or the end of the text."""
        depth = 0
        while i < len(text):
            c, two = text[i], text[i:i + 2]
            if c == "#" or two == "//":
                i = text.find("\n", i)
                i = len(text) if i < 0 else i
                continue
            if two == "/*":
                i = text.find("*/", i + 2) + 2 or len(text)
                continue
            if c == '"':
                i = template(i + 1, None)
                continue
            heredoc = HEREDOC.match(text, i)
            if heredoc:
                end = re.compile(rf"(?m)^[ \t]*{heredoc.group(1)}[ \t]*$").search(text, heredoc.end())
                stop = end.start() if end else len(text)
                template(heredoc.end(), stop)
                i = end.end() if end else stop
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                if depth == 0 and inside:
                    return i + 1
                depth -= 1
            out.append(c)
            i += 1
        return i

    def template(i: int, stop) -> int:
        """A string's body (stop None: up to its closing quote) or a heredoc's (up to stop)."""
        while i < (len(text) if stop is None else stop):
            c, three = text[i], text[i:i + 3]
            if stop is None and c == '"':
                return i + 1
            if stop is None and c == "\\":
                i += 2
            elif three in ("$${", "%%{"):
                i += 3
            elif three[:2] in ("${", "%{"):
                out.append(" (")
                i = code(i + 2, True)
                out.append(") ")
            else:
                out.append("\n" if c == "\n" else " ")
                i += 1
        return i

    code(0, False)
    return "".join(out)


# Names before a dot that are not references to a declaration: Terraform's own objects, and
# (collected per file) for-expression symbols and dynamic blocks' iterators.
BUILTIN_OBJECTS = {"var", "local", "module", "data", "each", "count", "self", "path", "terraform"}
RESOURCE_REF = re.compile(r"(?<![\w.])([a-z][a-z0-9]*_[a-z0-9_]+)\.([A-Za-z_][\w-]*)")


def reference_problems(root: Root, outputs_of) -> list:
    """Undeclared references in a root or module; outputs_of(source) is a local module's outputs."""
    problems = []
    for tf in sorted(root.path.glob("*.tf")):
        raw = tf.read_text()
        code = expressions(raw)
        symbols = set(BUILTIN_OBJECTS)
        for m in re.finditer(r"\bfor\s+(\w+)(?:\s*,\s*(\w+))?\s+in\b", code):
            symbols.update(g for g in m.groups() if g)
        # A dynamic block's iterator: the block's label, or its `iterator` argument.
        symbols.update(re.findall(r'(?m)^\s*dynamic\s+"(\w+)"', raw))
        symbols.update(re.findall(r"(?m)^\s*iterator\s*=\s*(\w+)", raw))
        found = []
        for name in re.findall(r"(?<![\w.])var\.(\w+)", code):
            if name not in root.variables:
                found.append(f"var.{name} (no variable \"{name}\")")
        for name in re.findall(r"(?<![\w.])local\.(\w+)", code):
            if name not in root.locals:
                found.append(f"local.{name} (no such local)")
        for name, out in re.findall(r"(?<![\w.])module\.(\w+)(?:\.(\w+))?", code):
            body = root.modules.get(name)
            if body is None:
                found.append(f"module.{name} (no module \"{name}\")")
            elif out:
                declared = outputs_of(root.path, unq(body.get("source", "")))
                if declared is not None and out not in declared:
                    found.append(f"module.{name}.{out} (no output \"{out}\" in {unq(body.get('source'))})")
        for rtype, rname in re.findall(r"(?<![\w.])data\.(\w+)\.([\w-]+)", code):
            if (rtype, rname) not in root.data:
                found.append(f"data.{rtype}.{rname} (no data \"{rtype}\" \"{rname}\")")
        for rtype, rname in RESOURCE_REF.findall(code):
            if rtype not in symbols and (rtype, rname) not in root.resources:
                found.append(f"{rtype}.{rname} (no resource \"{rtype}\" \"{rname}\")")
        problems += [f"{tf.name}: {f}" for f in sorted(set(found))]
    return problems


def check_references(repo: Path, report: Report):
    cache = {}

    def outputs_of(base: Path, source: str):
        if not source.startswith(("./", "../")):
            return None  # a registry module: its outputs are not here
        path = (base / source).resolve()
        if path not in cache:
            cache[path] = set(load_root(path).outputs) if path.is_dir() else set()
        return cache[path]

    tf = repo / "infra/terraform"
    for path in [tf / n for n in ROOTS] + sorted(p for p in (tf / "modules").iterdir() if p.is_dir()):
        name = str(path.relative_to(tf))
        report.check(f"{name}: every var, local, module, data source and resource it refers to is declared",
                     reference_problems(load_root(path), outputs_of))


# ---------------------------------------------------------------------------------------------
# Who runs the jobs: the schedulers' own credential, never a person's secret
# ---------------------------------------------------------------------------------------------
# The app's operators are `name:role:secret` entries, roles viewer, operator and scheduler (the
# job routes, /admin/jobs/*, and nothing else). Every root takes `scheduler_token` (sensitive,
# validated) and passes it to modules/app-variables, which adds `scheduler:scheduler:<token>` to
# the operators; a scheduler that calls the job routes sends that token (SpinKube's ticker, from
# a header file mounted from the Secret), and nothing hands a person's secret to one.

SCHEDULER_ENTRY = "scheduler:scheduler:${var.scheduler_token}"


def scheduler_token_problems(decl, where: str, required: bool) -> list:
    if decl is None:
        return [f"{where} has no variable scheduler_token"]
    problems = []
    if decl.get("sensitive") is not True:
        problems.append(f"{where}: variable scheduler_token is not sensitive")
    if not any("var.scheduler_token" in expr(v.get("condition", "")) and "{32,}" in expr(v.get("condition", "")) for v in decl.get("validation", [])):
        problems.append(f"{where}: variable scheduler_token is not validated to at least 32 characters")
    if required and "default" in decl:
        problems.append(f"{where}: variable scheduler_token has a default: the ticker needs one")
    return problems


def code_lines(text: str) -> str:
    """HCL text without comments and descriptions (where a word may name what code must not do)."""
    return "\n".join(l for l in text.splitlines() if not re.match(r"\s*(#|//|description\s*=|error_message\s*=)", l))


def check_scheduler_credentials(repo: Path, report: Report):
    tf = repo / "infra/terraform"
    mod = load_root(tf / "modules/app-variables")
    problems = scheduler_token_problems(mod.variables.get("scheduler_token"), "module", False)
    ops = expr(mod.locals.get("operators", ""))
    if not ("var.secrets.operators" in ops and f",{SCHEDULER_ENTRY}" in ops):
        problems.append(f"module local.operators is not var.secrets.operators with \",{SCHEDULER_ENTRY}\" appended: {ops!r}")
    if expr((mod.locals.get("spin_variables") or {}).get("operators", "")) != "local.operators":
        problems.append("module spin_variables.operators is not local.operators")
    conditions = [expr(v.get("condition", "")) for v in mod.variables.get("secrets", {}).get("validation", [])]
    if not any(re.search(r"\((?=[a-z|]*\bscheduler\b)(?=[a-z|]*\boperator\b)(?=[a-z|]*\bviewer\b)[a-z|]+\)", c) for c in conditions):
        problems.append("module variable secrets does not accept the roles viewer, operator and scheduler in operators")
    out = mod.outputs.get("scheduler_token", {})
    if expr(out.get("value", "")) != "var.scheduler_token" or out.get("sensitive") is not True:
        problems.append("module has no sensitive output scheduler_token = var.scheduler_token")
    for name, body in mod.outputs.items():
        if re.search(r":operator:|operator_entries", json.dumps(body.get("value"))):
            problems.append(f"module output {name} hands out an operator's (a person's) secret")
    report.check("module app-variables: the schedulers' token is an operators entry of its own (role scheduler); no output hands out a person's secret", problems)

    for n in ROOTS:
        root = load_root(tf / n)
        problems = scheduler_token_problems(root.variables.get("scheduler_token"), n, n == "spinkube")
        if expr(root.modules.get("app_variables", {}).get("scheduler_token", "")) != "var.scheduler_token":
            problems.append("module app_variables does not get scheduler_token = var.scheduler_token")
        code = code_lines(root.text)
        if re.search(r"\boperator_secret\b|:operator:", code):
            problems.append("the root takes an operator's (a person's) secret out of operators")
        if n == "spinkube":
            secret = root.resources.get(("kubernetes_secret_v1", "spin"), {})
            data = json.dumps(secret.get("data", ""))
            if not re.search(r'authorization = \\"Authorization: Bearer \$\{(module\.app_variables|var)\.scheduler_token\}\\"', data):
                problems.append(f"the ticker's header file (the Secret's key authorization) is not `Authorization: Bearer <scheduler_token>`: {data[:200]}")
            ticker = root.resources.get(("kubernetes_deployment_v1", "ticker"), {})
            mounted = json.dumps(ticker)
            if not (re.search(r'"secret_name": "\$\{kubernetes_secret_v1\.spin\.metadata\[0\]\.name\}"', mounted) and '"key": "\\"authorization\\""' in mounted):
                problems.append("the ticker does not mount the Secret's key authorization")
            script = unq(root.locals.get("ticker_script", ""))
            if "-H @/run/seckill/authorization" not in script:
                problems.append("the ticker's curl does not send the header file (-H @/run/seckill/authorization)")
            paths = re.findall(r'call "([^"?]*)', script)
            if not paths or any(not re.fullmatch(r"/admin/jobs/[\w-]+", p) for p in paths):
                problems.append(f"the ticker calls more than the job routes: {paths}")
        report.check(f"{n}: a scheduler sends the scheduler token (role scheduler), never an operator's secret", problems)


# ---------------------------------------------------------------------------------------------
# SpinKube: the app's pods on the network (a NetworkPolicy)
# ---------------------------------------------------------------------------------------------

NON_PUBLIC = {
    "0.0.0.0/0": {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "169.254.0.0/16"},
    "::/0": {"fc00::/7", "::1/128", "fe80::/10"},
}


def blocks_of(body: dict, name: str) -> list:
    """(block, iterator) for each block `name` of body: static ones (iterator None) and the
    content of each `dynamic "name"` ({"iterator": ..., "for_each": <expression>})."""
    found = [(b, None) for b in body.get(name, [])]
    for d in body.get("dynamic", []):
        for label, spec in d.items():
            if unq(label) == name:
                it = unq(spec.get("iterator", name))
                found += [(c, {"iterator": it, "for_each": expr(spec.get("for_each", ""))}) for c in spec.get("content", [])]
    return found


def check_network_policy(repo: Path, root: Root, report: Report):
    title = "spinkube: a NetworkPolicy lets the app's pods take requests from the proxies and the ticker, and reach DNS, Redis, Postgres and public HTTPS only"
    policies = {n: b for (t, n), b in root.resources.items() if t == "kubernetes_network_policy_v1"}
    if len(policies) != 1:
        report.check(title, [f"expected one kubernetes_network_policy_v1, found {sorted(policies)}"])
        return
    (name, body), = policies.items()
    problems = []
    switch = re.fullmatch(r"var\.(\w+) == null \? 0 : 1", expr(body.get("count", "")))
    if switch is None or root.variables.get(switch.group(1), {}).get("default") != {}:
        problems.append(f"{name}: count is not `var.X == null ? 0 : 1` with X on by default ({{}}): {body.get('count')!r}")
    spec = (body.get("spec") or [{}])[0]
    apps = [expr(b.get("manifest", {}).get("metadata", {}).get("name", "")) for (t, _), b in root.resources.items()
            if t == "kubernetes_manifest" and unq(b.get("manifest", {}).get("kind")) == "SpinApp"]
    sel = [m for ps in spec.get("pod_selector", []) for m in ps.get("match_expressions", [])]
    if not (len(sel) == 1 and unq(sel[0].get("key")) == "core.spinkube.dev/app-name" and unq(sel[0].get("operator")) == "In"
            and sorted(expr(v) for v in sel[0].get("values", [])) == sorted(apps) and apps):
        problems.append(f"{name}: the pod selector is not core.spinkube.dev/app-name In the SpinApps' names {apps}: {sel}")
    if sorted(unq(x) for x in spec.get("policy_types", [])) != ["Egress", "Ingress"]:
        problems.append(f"{name}: policy_types {spec.get('policy_types')} are not Ingress and Egress")

    # Ingress: the proxies' namespaces and the ticker's pods, nothing else.
    ticker = root.resources.get(("kubernetes_deployment_v1", "ticker"), {})
    ticker_labels = json.dumps(((((ticker.get("spec") or [{}])[0].get("template") or [{}])[0].get("metadata") or [{}])[0]).get("labels"))
    kinds = []
    for rule in spec.get("ingress", []):
        peers = blocks_of(rule, "from")
        if not peers:
            problems.append(f"{name}: an ingress rule without `from` admits every source")
        for peer, _ in peers:
            ns = [m for s in peer.get("namespace_selector", []) for m in s.get("match_expressions", [])]
            pods = [s.get("match_labels") for s in peer.get("pod_selector", [])]
            if peer.get("ip_block"):
                problems.append(f"{name}: an ingress rule admits an address range: {peer['ip_block']}")
            elif ns and not pods and len(ns) == 1 and unq(ns[0].get("key")) == "kubernetes.io/metadata.name" and unq(ns[0].get("operator")) == "In" \
                    and expr(ns[0].get("values", "")) == "local.network_policy_ingress_namespaces":
                kinds.append("proxies")
            elif pods and not peer.get("namespace_selector") and json.dumps(pods[0]) == ticker_labels:
                kinds.append("ticker")
            else:
                problems.append(f"{name}: an ingress peer that is neither the proxies' namespaces nor the ticker's pods: {peer}")
    if sorted(kinds) != ["proxies", "ticker"]:
        problems.append(f"{name}: ingress admits {sorted(kinds)}, not the proxies' namespaces and the ticker")
    ns_local = expr(root.locals.get("network_policy_ingress_namespaces", ""))
    if not ("var.network_policy.ingress_namespaces" in ns_local and "var.gateway.namespace" in ns_local):
        problems.append(f"local.network_policy_ingress_namespaces is not network_policy.ingress_namespaces, else the Gateway's namespace: {ns_local!r}")

    # Egress: DNS, Redis, Postgres, public HTTPS; each with its destinations and ports.
    public = root.locals.get("network_policy_public")
    https_ports = expr(root.locals.get("network_policy_https_ports", ""))
    redis_ports = expr(root.locals.get("network_policy_redis_ports", ""))
    kinds = []
    for rule in spec.get("egress", []):
        peers, ports = blocks_of(rule, "to"), blocks_of(rule, "ports")
        if not peers:
            problems.append(f"{name}: an egress rule without `to` reaches every address")
            continue
        if not ports:
            problems.append(f"{name}: an egress rule without `ports` reaches every port")
            continue
        port_set = sorted((expr(p.get("port", "")) if it is None else f"{it['for_each']}", unq(p.get("protocol", ""))) for p, it in ports)
        ips = [(b, it) for peer, it in peers for b in peer.get("ip_block", [])]
        selectors = [peer for peer, _ in peers if peer.get("namespace_selector") or peer.get("pod_selector")]
        sources = sorted({it["for_each"] if it else "literal" for _, it in ips})
        if port_set == [("53", "TCP"), ("53", "UDP")] and selectors and not ips:
            if not all(unq(k) == "kubernetes.io/metadata.name" for s in selectors for ns in s.get("namespace_selector", []) for k in (ns.get("match_labels") or {})):
                problems.append(f"{name}: DNS is allowed to pods other than the DNS namespace's")
            kinds.append("dns")
        elif port_set == [("local.network_policy_redis_ports", "TCP")] and sources == ["var.network_policy.redis_cidrs"] and not selectors:
            if not re.fullmatch(r"distinct\(\[for (\w+) in var\.redis_endpoints : \1\.port\]\)", redis_ports):
                problems.append(f"local.network_policy_redis_ports is not the ports of var.redis_endpoints: {redis_ports!r}")
            kinds.append("redis")
        elif port_set == [("tostring(var.postgres.port)", "TCP")] and sources == ["var.network_policy.postgres_cidrs"] and not selectors:
            kinds.append("postgres")
        elif port_set == [("local.network_policy_https_ports", "TCP")] and sources == ["local.network_policy_public"] and not selectors:
            if not (re.search(r"\b443\b", https_ports) and "var.payment_api_url" in https_ports):
                problems.append(f"local.network_policy_https_ports is not 443 and payment_api_url's port: {https_ports!r}")
            if not isinstance(public, dict) or not public:
                problems.append("local.network_policy_public is not a literal map of ranges to their exceptions")
            else:
                for cidr, excepts in public.items():
                    want = NON_PUBLIC.get(cidr)
                    missing = sorted((want or {"?"}) - {unq(e) for e in (excepts or [])})
                    if want is None or missing:
                        problems.append(f"{name}: HTTPS to {cidr} reaches private, loopback or link-local addresses: {missing} not excepted")
            if any(expr(b.get("except", "")) != f"{it['iterator']}.value" or expr(b.get("cidr", "")) != f"{it['iterator']}.key" for b, it in ips):
                problems.append(f"{name}: the HTTPS rule's ip_block is not each range of local.network_policy_public with its exceptions")
            kinds.append("https")
        else:
            problems.append(f"{name}: an egress rule that is none of DNS, Redis, Postgres, public HTTPS: ports {port_set}, destinations {sources or selectors}")
    if sorted(kinds) != ["dns", "https", "postgres", "redis"]:
        problems.append(f"{name}: egress rules {sorted(kinds)}, not dns, https, postgres and redis once each")
    report.check(title, problems)


# ---------------------------------------------------------------------------------------------
# The demo sign-in only where a root says it is a demo
# ---------------------------------------------------------------------------------------------

DEMO_PATTERN = 'demo_login = var.demo_environment ? "^(true|false)$" : "^false$"'


def demo_environment_problems(decl, where: str) -> list:
    if decl is None:
        return [f"{where} has no variable demo_environment"]
    if expr(decl.get("type", "")) != "bool" or decl.get("default") is not False:
        return [f"{where}: variable demo_environment is not a bool defaulting to false: {decl}"]
    return []


def check_demo_environment(repo: Path, report: Report):
    tf = repo / "infra/terraform"
    mod = load_root(tf / "modules/app-variables")
    problems = demo_environment_problems(mod.variables.get("demo_environment"), "module")
    if DEMO_PATTERN not in re.sub(r"\s+", " ", expr(mod.locals.get("setting_patterns", ""))):
        problems.append(f"module local.setting_patterns does not make demo_login \"false\" only, but in a demo environment ({DEMO_PATTERN})")
    report.check("module app-variables: demo_login = \"true\" only with demo_environment", problems)
    for n in ROOTS:
        root = load_root(tf / n)
        problems = demo_environment_problems(root.variables.get("demo_environment"), n)
        if expr(root.modules.get("app_variables", {}).get("demo_environment", "")) != "var.demo_environment":
            problems.append("module app_variables does not get demo_environment = var.demo_environment")
        report.check(f"{n}: settings refuse demo_login = \"true\" unless demo_environment", problems)


# ---------------------------------------------------------------------------------------------
# AWS: CloudFront's cache key holds the query parameters the cached routes read, no others
# ---------------------------------------------------------------------------------------------

def glob_matches(glob: str, path: str) -> bool:
    return re.fullmatch(re.escape(glob).replace(r"\*", ".*").replace(r"\?", "."), path) is not None


def component_sources(repo: Path, man, component: str) -> list:
    """The Rust sources of a manifest component: the crate its build command names (-p NAME)."""
    command = man.get("component", {}).get(component, {}).get("build", {}).get("command", "")
    m = re.search(r"-p\s+([\w-]+)", command)
    if not m:
        return []
    for cargo in sorted((repo / "functions").glob("*/Cargo.toml")):
        if re.search(rf'(?m)^name\s*=\s*"{re.escape(m.group(1))}"', cargo.read_text()):
            return sorted((cargo.parent / "src").rglob("*.rs"))
    return []


def check_cdn_cache_key(repo: Path, root: Root, manifests, report: Report):
    title = "aws: CloudFront's cache key holds exactly the query parameters the cached routes read"
    problems = []
    cached = [unq(g) for g in root.locals.get("cdn_cached_paths") or []]
    if not cached:
        report.check(title, ["cdn.tf has no literal local cdn_cached_paths"])
        return
    allowed = root.locals.get("cdn_cached_query_parameters")
    if not isinstance(allowed, list):
        problems.append("cdn.tf has no literal local cdn_cached_query_parameters (the query parameters the cached routes read)")
    allowed = sorted(unq(a) for a in allowed) if isinstance(allowed, list) else None
    policy = root.resources.get(("aws_cloudfront_cache_policy", "origin_cache_control"), {})
    qs = [q for p in policy.get("parameters_in_cache_key_and_forwarded_to_origin", []) for q in p.get("query_strings_config", [])]
    behaviour = expr(qs[0].get("query_string_behavior", "")) if qs else ""
    items = json.dumps(blocks_of(qs[0], "query_strings")) if qs else ""
    if not (re.fullmatch(r'length\(local\.cdn_cached_query_parameters\) > 0 \? "whitelist" : "none"', behaviour) and "local.cdn_cached_query_parameters" in items):
        problems.append(f"the cache policy's query strings are not local.cdn_cached_query_parameters (whitelist, or none when empty): behaviour {behaviour!r}")
    behaviours = [b for d in root.resources.get(("aws_cloudfront_distribution", "app"), {}).get("dynamic", [])
                  for label, b in d.items() if unq(label) == "ordered_cache_behavior" and "origin_cache_control" in json.dumps(b)]
    if not any(expr(b.get("for_each", "")) == "local.cdn_cached_paths" for b in behaviours):
        problems.append("no ordered_cache_behavior over local.cdn_cached_paths uses the cache policy")
    man = manifests["spin.toml"]
    components = sorted({t.get("component") for t in man.get("trigger", {}).get("http", []) if isinstance(t.get("route"), str)
                         and any(glob_matches(g, s) for g in cached for s in route_samples(t["route"]))})
    read, unknown = set(), []
    for c in components:
        sources = component_sources(repo, man, c)
        if not sources:
            problems.append(f"component {c} serves a cached path, but its sources (functions/*, by its build's -p) are not found")
        for src in sources:
            text = src.read_text()
            read |= set(re.findall(r'query_param\(\s*[^,()]+,\s*"([^"]+)"\s*\)', text))
            if re.search(r"\bshards_hint\(", text):
                read.add("shards")
            if re.search(r"\.query\(\)", text):
                unknown.append(f"{src.relative_to(repo)} reads the query string itself (.query()): name its parameters with http::query_param")
    problems += unknown
    if allowed is not None and sorted(read) != allowed:
        problems.append(f"the cached routes ({', '.join(cached)}: components {components}) read the query parameters {sorted(read)}, the cache key holds {allowed}")
    report.check(title, problems)


def run_checks(repo: Path, report: Report):
    manifests = load_manifests(repo)
    check_manifest_defaults(manifests, report)
    check_module(repo, report)
    for name in ROOTS:
        root = load_root(repo / "infra/terraform" / name)
        check_root(repo, root, manifests, report)
        check_spin_settings(repo, root, report)
        if name == "aws":
            check_host_runtime(repo, root, report)
            check_cdn_cache_key(repo, root, manifests, report)
        if name == "spinkube":
            check_alert_rules(repo, root, report)
            check_dashboard(repo, root, report)
            check_critical_routes(repo, root, manifests, report)
            check_network_policy(repo, root, report)
    check_scheduler_credentials(repo, report)
    check_demo_environment(repo, report)
    check_deploy_guide(repo, report)
    check_runtime_config_writer(repo, manifests, report)
    check_references(repo, report)


# ---------------------------------------------------------------------------------------------
# Self-check: every defect below must be reported
# ---------------------------------------------------------------------------------------------

def edit(path: Path, old: str, new: str):
    text = path.read_text()
    if old not in text:
        raise AssertionError(f"self-check: {old!r} not found in {path}")
    path.write_text(text.replace(old, new, 1))


DEFECTS = [
    # (what, file, old, new, expected message fragment); old may be a list of (old, new) edits
    ("a password input not sensitive", "infra/terraform/serverless/variables.tf",
     'variable "neon_api_key" {\n  description = "A Neon API key."\n  type        = string\n  sensitive   = true\n',
     'variable "neon_api_key" {\n  description = "A Neon API key."\n  type        = string\n',
     "variable neon_api_key holds a secret but is not sensitive"),
    ("a secret output not sensitive", "infra/terraform/spinkube/outputs.tf",
     'value       = { for k, v in merge(local.spin_public_variables, local.spin_secret_variables) : "SPIN_VARIABLE_${upper(k)}" => v }\n  sensitive   = true\n',
     'value       = { for k, v in merge(local.spin_public_variables, local.spin_secret_variables) : "SPIN_VARIABLE_${upper(k)}" => v }\n',
     "output spin_environment carries"),
    ("a required secret not delivered", "infra/terraform/spinkube/main.tf",
     "    operators        = module.app_variables.spin_variables.operators\n", "",
     "operators is not supplied"),
    ("redis_origin not from the URLs' endpoints", "infra/terraform/aws/spin.tf",
     "redis_origin    = module.app_variables.hosts.redis_origin", 'redis_origin    = "rediss://${var.redis_host_pattern}"',
     "not module.app_variables.hosts.redis_origin"),
    ("a root that still delivers redis_host", "infra/terraform/spinkube/main.tf",
     "    redis_origin    = module.app_variables.hosts.redis_origin\n", "    redis_host      = module.app_variables.hosts.redis_origin\n",
     "redis_origin is not supplied"),
    ("a secret in user_data", "infra/terraform/aws/app.tf",
     "SECKILL_REGION              = var.region", "SECKILL_REGION = module.app_variables.environment[\"SPIN_VARIABLE_OPERATORS\"]",
     "carries module.app_variables.environment in the clear"),
    ("a secret on a deploy command line", "infra/terraform/serverless/main.tf",
     'command     = "sh infra/terraform/files/migrate-locked.sh migrations"',
     'command     = "sh infra/terraform/files/migrate-locked.sh migrations ${module.app_variables.spin_variables.pg_url}"',
     "carries module.app_variables.spin_variables in the clear"),
    ("a secret variable delivered in the clear", "infra/terraform/serverless/main.tf",
     "    pg_host         = module.app_variables.hosts.pg_host\n",
     "    pg_host         = module.app_variables.hosts.pg_host\n    jwt_secret      = module.app_variables.hosts.pg_host\n",
     "jwt_secret is secret in the manifest but delivered in the clear"),
    # The payment provider's API
    ("the provider's API key not delivered", "infra/terraform/spinkube/main.tf",
     "    payment_api_key = module.app_variables.spin_variables.payment_api_key\n", "",
     "payment_api_key is made by modules/app-variables but not delivered"),
    ("the provider's API key delivered in the clear", "infra/terraform/serverless/main.tf",
     "    payment_api_url = module.app_variables.hosts.payment_api_url\n",
     "    payment_api_url = module.app_variables.hosts.payment_api_url\n    payment_api_key = module.app_variables.hosts.payment_api_url\n",
     "payment_api_key is secret in the manifest but delivered in the clear"),
    ("a root whose secrets input cannot carry the API key", "infra/terraform/aws/variables.tf",
     '    payment_api_key         = optional(string, "")\n', "",
     "variable secrets lacks payment_api_key"),
    ("the API key made required in the module", "infra/terraform/modules/app-variables/variables.tf",
     '    payment_api_key         = optional(string, "")\n', "    payment_api_key         = string\n",
     "variable secrets does not make payment_api_key optional"),
    ("the API key input not sensitive", "infra/terraform/spinkube/variables.tf",
     '    payment_api_key         = optional(string, "")\n  })\n  sensitive = true\n', '    payment_api_key         = optional(string, "")\n  })\n',
     "variable secrets is not sensitive"),
    ("the API origin not delivered", "infra/terraform/aws/spin.tf",
     "    payment_api_url = module.app_variables.hosts.payment_api_url\n", "",
     "payment_api_url is not supplied"),
    ("the API origin accepted unvalidated", "infra/terraform/spinkube/variables.tf",
     'can(regex("^https://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$", var.payment_api_url))', "length(var.payment_api_url) > 0",
     "variable payment_api_url is not validated as an https:// origin"),
    ("the API origin not passed to the module", "infra/terraform/serverless/main.tf",
     "  payment_api_url   = var.payment_api_url\n", "",
     "module app_variables does not get payment_api_url = var.payment_api_url"),
    ("the module leaving the API origin out of allowed_outbound_hosts", "infra/terraform/modules/app-variables/outputs.tf",
     '["postgres://${local.pg_host}", var.payment_api_url]', '["postgres://${local.pg_host}"]',
     "module output allowed_outbound_hosts leaves out var.payment_api_url"),
    ("a component that cannot reach the provider's API", "spin.toml",
     'allowed_outbound_hosts = ["postgres://{{ pg_host }}", "{{ payment_api_url }}"]', 'allowed_outbound_hosts = ["postgres://{{ pg_host }}"]',
     "spin.toml component pay may not reach https://api.stripe.com (payment_api_url)"),
    # The settings
    ("the settings no longer delivered", "infra/terraform/spinkube/main.tf",
     "spin_public_variables = merge(module.app_variables.settings_variable, local.spin_host_variables)",
     "spin_public_variables = local.spin_host_variables",
     "local.spin_public_variables must merge module.app_variables.settings_variable"),
    ("a root that keeps its settings from the module", "infra/terraform/serverless/main.tf",
     "  settings          = var.settings\n", "",
     "module app_variables does not get settings = var.settings"),
    ("settings accepted unvalidated", "infra/terraform/aws/variables.tf",
     "condition     = alltrue([for k, v in var.settings : can(regex(module.app_variables.setting_patterns[k], v))])",
     "condition     = alltrue([for k, v in var.settings : length(k) > 0])",
     "variable settings is not validated"),
    ("the module joins the settings with another separator", "infra/terraform/modules/app-variables/main.tf",
     'settings          = join(",", ', 'settings          = join(";", ',
     "module local.settings is not"),
    ("the module sets settings even when none is given", "infra/terraform/modules/app-variables/main.tf",
     "settings_variable = length(local.setting_values) > 0 ? { settings = local.settings } : {}",
     "settings_variable = { settings = local.settings }",
     "module local.settings_variable is not"),
    ("the module joins the trusted proxies with commas", "infra/terraform/modules/app-variables/main.tf",
     'trusted_proxies = join(" ", var.trusted_proxies)', 'trusted_proxies = join(",", var.trusted_proxies)',
     "module local.setting_values is not"),
    ("the module takes any text as a trusted proxy", "infra/terraform/modules/app-variables/variables.tf",
     "condition     = alltrue([for c in var.trusted_proxies : can(cidrhost(c, 0))])", "condition     = true",
     "module variable trusted_proxies is missing or not validated"),
    ("the AWS root no longer trusts its load balancer", "infra/terraform/aws/spin.tf",
     "  trusted_proxies = local.public_cidrs\n", "",
     "module app_variables gets trusted_proxies = None"),
    ("the SpinKube root drops its trusted_proxies input", "infra/terraform/spinkube/main.tf",
     "  trusted_proxies    = var.trusted_proxies\n", "",
     "module app_variables gets trusted_proxies = None"),
    ("a setting the app does not know", "infra/terraform/modules/app-variables/main.tf",
     'release_batch                = "1000"', 'release_batch                = "1000"\n    poll_drain_ms                = "0"',
     "differs from the app's settings"),
    ("the settings made secret in a manifest", "spin.http.toml",
     'settings = { default = "" }', 'settings = { default = "", secret = true }',
     "settings is secret in the manifest but delivered in the clear"),
    ("a host pattern without the port rediss:// needs", "infra/terraform/serverless/variables.tf",
     'default     = "*.upstash.io:6379"', 'default     = "*.upstash.io"',
     "none of the root's host patterns"),
    ("the module drops the port from redis_origin", "infra/terraform/modules/app-variables/main.tf",
     'redis_addrs = [for e in var.redis_endpoints : "${e.host}:${e.port}"]',
     'redis_addrs = [for e in var.redis_endpoints : "${e.host}"]',
     "module local.redis_addrs"),
    ("a component without its Redis entry", "spin.http.toml",
     'allowed_outbound_hosts = ["{{ redis_origin }}"]', "allowed_outbound_hosts = []",
     "may not reach"),
    ("a component that puts a fixed scheme before redis_origin", "spin.toml",
     'allowed_outbound_hosts = ["{{ redis_origin }}", "postgres://{{ pg_host }}"]',
     'allowed_outbound_hosts = ["redis://{{ redis_origin }}", "postgres://{{ pg_host }}"]',
     "may not reach"),
    ("redis_origin's scheme disagrees with redis_url's", "infra/terraform/modules/app-variables/main.tf",
     'redis_origin = local.redis_host != null ? "${local.redis_scheme}://${local.redis_host}" : null',
     'redis_origin = local.redis_host != null ? "redis://${local.redis_host}" : null',
     "redis_origin's scheme 'redis' is not redis_url's (rediss)"),
    ("the module builds redis_url with another scheme than redis_origin's", "infra/terraform/modules/app-variables/main.tf",
     'for i, a in local.redis_addrs : "${local.redis_scheme}://', 'for i, a in local.redis_addrs : "redis://',
     "may not reach redis://"),
    ("the module no longer checks that redis_origin admits every node", "infra/terraform/modules/app-variables/outputs.tf",
     "condition     = length(local.redis_uncovered) == 0", "condition     = true",
     "no precondition that redis_origin admits every node"),
    ("a manifest whose default redis_origin has another scheme than its redis_url", "spin.toml",
     'redis_origin = { default = "redis://127.0.0.1:6379" }', 'redis_origin = { default = "rediss://127.0.0.1:6379" }',
     "spin.toml defaults"),
    # Spin's settings
    ("spin up logging to files again", "infra/terraform/aws/files/boot.sh.tftpl",
     ' --log-dir "" ', " ",
     'lacks --log-dir ""'),
    ("spin up without the runtime config", "infra/terraform/aws/files/boot.sh.tftpl",
     ' --runtime-config-file "$config"', "",
     "lacks --runtime-config-file"),
    ("RUST_BACKTRACE set in the unit", "infra/terraform/aws/files/boot.sh.tftpl",
     "Environment=RUST_LIB_BACKTRACE=0\n", "Environment=RUST_LIB_BACKTRACE=0\nEnvironment=RUST_BACKTRACE=1\n",
     "sets 'RUST_BACKTRACE=1'"),
    ("RUST_BACKTRACE no longer unset", "infra/terraform/aws/files/boot.sh.tftpl",
     [("UnsetEnvironment=RUST_BACKTRACE\n", ""), ("unset RUST_BACKTRACE\n", "")], None,
     "RUST_BACKTRACE is not explicitly unset"),
    # The AWS root's runtime = "seckill-host"
    ("runtime accepted unvalidated", "infra/terraform/aws/variables.tf",
     'condition     = contains(["spin", "seckill-host"], var.runtime)', "condition     = length(var.runtime) > 0",
     "variable runtime is not validated"),
    ("the host's drop-in reads the secrets from another file than host-prestart writes", "infra/terraform/aws/files/boot.sh.tftpl",
     "EnvironmentFile=-/run/seckill/secrets.env", "EnvironmentFile=-/run/seckill-host/secrets.env",
     "the boot writes /run/seckill/secrets.env but neither"),
    ("the host's unit no longer reads boot.env", "infra/terraform/files/seckill-host.service",
     "EnvironmentFile=-/etc/seckill/boot.env\n", "",
     "the boot writes /etc/seckill/boot.env but neither"),
    ("the host's unit no longer unsets RUST_BACKTRACE", "infra/terraform/files/seckill-host.service",
     "UnsetEnvironment=RUST_BACKTRACE\n", "",
     "seckill-host.service does not unset RUST_BACKTRACE"),
    ("the seckill-host boot installs Spin", "infra/terraform/aws/files/boot.sh.tftpl",
     "systemctl enable --now seckill-host.service\n", "systemctl enable --now seckill-host.service\nspin plugins install --yes --url x\n",
     "the seckill-host boot still installs or runs Spin"),
    ("RUST_BACKTRACE in a deploy command's environment", "infra/terraform/serverless/main.tf",
     "      SECKILL_MANIFEST         = var.manifest\n",
     '      SECKILL_MANIFEST         = var.manifest\n      RUST_BACKTRACE           = "full"\n',
     "sets 'RUST_BACKTRACE"),
    ("a writer that leaves the environment provider in charge", "infra/terraform/files/spin-runtime-config.sh",
     'print "type = \\"static\\""', 'print "type = \\"env\\""',
     "expected one static provider"),
    ("a runtime config readable by others", "infra/terraform/files/spin-runtime-config.sh",
     'chmod 0600 "$tmp"', 'chmod 0644 "$tmp"',
     "not 600"),
    ("a SpinApp without its runtime config", "infra/terraform/spinkube/main.tf",
     "      runtimeConfig = { loadFromSecret = kubernetes_secret_v1.spin.metadata[0].name }\n", "",
     "no runtimeConfig.loadFromSecret"),
    ("a SpinApp runtime config without the secrets", "infra/terraform/spinkube/main.tf",
     "  values   = merge(local.spin_public_variables, local.spin_secret_variables)",
     "  values   = local.spin_public_variables",
     "values are not spin_public_variables and spin_secret_variables"),
    ("the runtime config in a SpinApp annotation", "infra/terraform/spinkube/main.tf",
     '"seckill/runtime-config-sha256" = module.runtime_config.sha256',
     '"seckill/runtime-config-sha256" = module.runtime_config.toml',
     "carries module.runtime_config.toml in the clear"),
    # The SpinKube root's alerts
    ("the PrometheusRule on by default", "infra/terraform/spinkube/variables.tf",
     "hence off by default.\"\n  type        = bool\n  default     = false", "hence off by default.\"\n  type        = bool\n  default     = true",
     "does not default to false"),
    ("the PrometheusRule from another file", "infra/terraform/spinkube/main.tf",
     "/../../prometheus/seckill.rules.yml", "/seckill.rules.yml",
     "spec.groups is not yamldecode(file(...)).groups of"),
    # The SpinKube root's dashboard
    ("the dashboard from another file", "infra/terraform/spinkube/main.tf",
     "/../../grafana/seckill.dashboard.json", "/seckill.dashboard.json",
     "data is not file(...) of"),
    ("the dashboard without the sidecar's label", "infra/terraform/spinkube/variables.tf",
     'default     = { grafana_dashboard = "1" }', 'default     = {}',
     "do not default to grafana_dashboard"),
    # The SpinKube root's critical routes
    ("a critical route missing from the critical HTTPRoute", "infra/terraform/spinkube/main.tf",
     "matches     = module.request_classes.gateway_critical_matches",
     'matches     = [{ path = { type = "Exact", value = "/api/payments/webhook" } }]',
     "POST /admin/jobs/job1 (/admin/jobs/:job, critical) reaches the main app"),
    ("the module leaving the job routes out", "infra/terraform/modules/request-classes/main.tf",
     '} if contains(values(local.classes[r]), "critical")]',
     '} if contains(values(local.classes[r]), "critical") && !startswith(r, "/admin/jobs/")]',
     "GET /admin/jobs/job1 (/admin/jobs/:job, critical) reaches the main app"),
    ("a route of spin.http.toml without a request class", "spin.http.toml",
     '"/admin/jobs/:job" = "critical"\n', "",
     "route /admin/jobs/:job has no request class"),
    ("the operators' reads sent to the critical app", "infra/terraform/spinkube/main.tf",
     "matches     = module.request_classes.gateway_main_matches", "matches     = []",
     "GET /admin/events (/admin/events, sale) reaches the critical app"),
    ("the ticker calling the main app", "infra/terraform/spinkube/main.tf",
     "value = local.critical_service_url", "value = local.app_service_url",
     "the ticker's APP_URL is not the critical SpinApp's Service"),
    ("critical pods whose requests are not their limits", "infra/terraform/spinkube/main.tf",
     "requests = var.critical_resources", 'requests = { cpu = "100m", memory = "64Mi" }',
     "requests are not its limits"),
    ("the critical SpinApp on another image", "infra/terraform/spinkube/main.tf",
     "      image          = var.image\n      executor       = var.executor\n      replicas       = var.critical_replicas",
     '      image          = "ghcr.io/acme/other:1"\n      executor       = var.executor\n      replicas       = var.critical_replicas',
     "the critical SpinApp's image"),
    # Who runs the jobs: the schedulers' own token
    ("the ticker back on an operator's secret", "infra/terraform/spinkube/main.tf",
     'authorization = "Authorization: Bearer ${module.app_variables.scheduler_token}"',
     'authorization = "Authorization: Bearer ${split(":", split(",", var.secrets.operators)[0])[2]}"',
     "the ticker's header file (the Secret's key authorization) is not"),
    ("the ticker calling more than the job routes", "infra/terraform/spinkube/main.tf",
     'call "/admin/jobs/timeout-release" 60', 'call "/admin/events" 60',
     "the ticker calls more than the job routes"),
    ("a root that does not pass the scheduler token", "infra/terraform/serverless/main.tf",
     "  scheduler_token   = var.scheduler_token\n", "",
     "module app_variables does not get scheduler_token = var.scheduler_token"),
    ("the scheduler's entry left out of operators", "infra/terraform/modules/app-variables/main.tf",
     "    operators        = local.operators\n", "    operators        = var.secrets.operators\n",
     "module spin_variables.operators is not local.operators"),
    ("a scheduler token of any length", "infra/terraform/spinkube/variables.tf",
     'condition     = can(regex("^[A-Za-z0-9._~+/-]{32,}=*$", var.scheduler_token))', "condition     = length(var.scheduler_token) > 0",
     "variable scheduler_token is not validated"),
    # The SpinKube root's NetworkPolicy
    ("HTTPS out to private ranges", "infra/terraform/spinkube/main.tf",
     '"0.0.0.0/0" = ["10.0.0.0/8", ', '"0.0.0.0/0" = [',
     "HTTPS to 0.0.0.0/0 reaches private, loopback or link-local addresses: ['10.0.0.0/8']"),
    ("an egress rule open to every port", "infra/terraform/spinkube/main.tf",
     '      ports {\n        port     = tostring(var.postgres.port)\n        protocol = "TCP"\n      }\n', "",
     "an egress rule without `ports` reaches every port"),
    ("ingress from every namespace", "infra/terraform/spinkube/main.tf",
     '            operator = "In"\n            values   = local.network_policy_ingress_namespaces\n', '            operator = "Exists"\n',
     "an ingress peer that is neither the proxies' namespaces nor the ticker's pods"),
    ("the NetworkPolicy off by default", "infra/terraform/spinkube/variables.tf",
     "  default = {}\n", "  default = null\n",
     "with X on by default"),
    # The demo sign-in
    ("a root that does not pass demo_environment", "infra/terraform/spinkube/main.tf",
     "  demo_environment   = var.demo_environment\n", "",
     "module app_variables does not get demo_environment = var.demo_environment"),
    ("demo_login = true anywhere", "infra/terraform/modules/app-variables/main.tf",
     'demo_login            = var.demo_environment ? "^(true|false)$" : "^false$"', 'demo_login            = "^(true|false)$"',
     "module local.setting_patterns does not make demo_login"),
    ("a demo environment by default", "infra/terraform/aws/variables.tf",
     "buy as anyone). False by default: the plan refuses demo_login = \\\"true\\\".\"\n  type        = bool\n  default     = false",
     "buy as anyone). False by default: the plan refuses demo_login = \\\"true\\\".\"\n  type        = bool\n  default     = true",
     "variable demo_environment is not a bool defaulting to false"),
    # CloudFront's cache key
    ("the cache key taking every query string", "infra/terraform/aws/cdn.tf",
     'query_string_behavior = length(local.cdn_cached_query_parameters) > 0 ? "whitelist" : "none"', 'query_string_behavior = "all"',
     "the cache policy's query strings are not local.cdn_cached_query_parameters"),
    ("a cached route reading a query parameter the key leaves out", "functions/web/src/lib.rs",
     "fn answer(req: Request) -> Response {\n", 'fn answer(req: Request) -> Response {\n    let _ = http::query_param(&req, "page");\n',
     "read the query parameters ['page'], the cache key holds []"),
    # References to what the root or module does not declare
    ("an undeclared variable", "infra/terraform/spinkube/main.tf",
     "replicas = var.replicas", "replicas = var.replica_count",
     "main.tf: var.replica_count (no variable"),
    ("an undeclared local", "infra/terraform/serverless/main.tf",
     "for_each = local.akamai_cron_jobs", "for_each = local.akamai_cron_job",
     "main.tf: local.akamai_cron_job (no such local)"),
    ("an undeclared local in a module", "infra/terraform/modules/spin-runtime-config/main.tf",
     "for d in local.declarations : d[0]]", "for d in local.declaration : d[0]]",
     "main.tf: local.declaration (no such local)"),
    ("an undeclared resource", "infra/terraform/aws/monitoring.tf",
     "workspace_id = aws_prometheus_workspace.alerts[0].id", "workspace_id = aws_prometheus_workspace.alert[0].id",
     "monitoring.tf: aws_prometheus_workspace.alert (no resource"),
    ("an undeclared data source", "infra/terraform/aws/cdn.tf",
     "data.aws_ec2_managed_prefix_list.cloudfront[*].id", "data.aws_ec2_managed_prefix_list.cloudfronts[*].id",
     "cdn.tf: data.aws_ec2_managed_prefix_list.cloudfronts (no data"),
    ("an output the module does not have", "infra/terraform/spinkube/main.tf",
     "= module.runtime_config.sha256 }", "= module.runtime_config.sha }",
     "main.tf: module.runtime_config.sha (no output"),
    ("an undeclared module", "infra/terraform/spinkube/outputs.tf",
     "value       = module.app_variables.allowed_outbound_hosts", "value       = module.app_variable.allowed_outbound_hosts",
     "outputs.tf: module.app_variable (no module"),
    ("the guide's spin up without --log-dir", "infra/terraform/DEPLOY.md",
     'spin up -f spin.toml --listen 0.0.0.0:3000 --log-dir "" ', "spin up -f spin.toml --listen 0.0.0.0:3000 ",
     'DEPLOY.md: `'),
]


def self_check(repo: Path, report: Report):
    with tempfile.TemporaryDirectory(prefix="check_roots.") as tmp:
        base = Path(tmp) / "pristine"
        shutil.copytree(repo / "infra/terraform", base / "infra/terraform", ignore=shutil.ignore_patterns(".terraform", "*.tfstate*"))
        for m in MANIFESTS:
            shutil.copy(repo / m, base / m)
        for rel in (SETTINGS_SOURCE, ALERT_RULES):
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(repo / rel, base / rel)
        # The domain's sources: the settings' defaults may name its constants.
        shutil.copytree(repo / "crates/domain/src", base / "crates/domain/src")
        # The components' sources (the CDN's cache key is held to what they read).
        for cargo in (repo / "functions").glob("*/Cargo.toml"):
            shutil.copytree(cargo.parent, base / cargo.parent.relative_to(repo), ignore=shutil.ignore_patterns("target"))
        pristine = Report(quiet=True)
        run_checks(base, pristine)
        report.check("self-check: an unmodified copy passes", [f"copy fails: {f}" for f in pristine.failures])
        for i, (what, rel, old, new, expected) in enumerate(DEFECTS):
            copy = Path(tmp) / f"defect{i}"
            shutil.copytree(base, copy)
            try:
                for o, n in (old if isinstance(old, list) else [(old, new)]):
                    edit(copy / rel, o, n)
            except AssertionError as e:
                report.check(f"self-check: reports {what}", [str(e)])
                continue
            broken = Report(quiet=True)
            try:
                run_checks(copy, broken)
            except Exception as e:  # a parse error is a detection too, but say so
                broken.failures.append(f"crashed: {e!r}")
            hit = [f for f in broken.failures if expected in f]
            report.check(f"self-check: reports {what}", [] if hit else [f"not reported (expected {expected!r}); got {broken.failures}"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--no-self-check", action="store_true")
    args = ap.parse_args()
    report = Report()
    run_checks(args.repo, report)
    if not args.no_self_check:
        self_check(args.repo, report)
    print(f"check_roots: {report.passed} passed, {report.failed} failed")
    return 0 if report.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
