#!/usr/bin/env python3
"""Checks the AWS root's Redis ACL (`local.redis_app_commands` in infra/terraform/aws/redis.tf,
the MemoryDB user's only commands) against the commands the app runs:

  lua   every redis.call / redis.pcall of crates/domain/lua/**/*.lua (an ACL applies inside a script):
        `redis.call('CMD', ...)`, `pcall(redis.call, 'CMD', ...)`, and `redis.call(unpack(t))`
        with `local t = {'CMD', ...}` in the same file; any other form is reported, as a
        command this check cannot name;
  rust  what the Rust sends itself (crates/, functions/, host/src; test modules left out):
        the command literals of `.execute("CMD"`, `eval_command("CMD"`, `redis::cmd("CMD")` in
        files that speak Redis. The host's implementations of Spin's Redis interface
        (get, set, incr, ...) send their command only when a guest calls that function, so they
        count only when the guests do (a call of it in a file using spin_sdk::redis).

Both ways: a command the app runs that the list lacks fails (the command and where it is used
named), and so does a listed command the app never runs (the ACL grants no more than it needs).

A self-check then plants a command in a copy of the sources and expects it reported.
Prints one line per check and closes with `check_redis_acl: N passed, N failed`.
Usage: python3 tests/terraform/check_redis_acl.py [--repo DIR] [--no-self-check]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

try:
    import hcl2
except ImportError:  # pragma: no cover - reported, not hidden
    print("check_redis_acl: python-hcl2 is not installed (python3 -m pip install python-hcl2)", file=sys.stderr)
    sys.exit(2)

ACL_FILE = "infra/terraform/aws/redis.tf"
ACL_LOCAL = "redis_app_commands"
LUA_DIR = "crates/domain/lua"
RUST_DIRS = ("crates", "functions", "host/src")

LUA_CALL = re.compile(r"redis\.p?call\s*\(\s*(?:(['\"])(\w+)\1|unpack\(\s*(\w+)\s*\)|(.{0,40}))")
LUA_PCALL_OF_CALL = re.compile(r"\bpcall\s*\(\s*redis\.p?call\s*,\s*(?:(['\"])(\w+)\1|(.{0,40}))")
RUST_LITERAL = re.compile(r"""(?:\.execute|\beval_command|\bredis::cmd)\(\s*"([A-Za-z]+)\"""")
# Spin's Redis interface (fermyon:spin/redis): each function, the command the host sends for it.
INTERFACE = {"publish": "publish", "get": "get", "set": "set", "incr": "incrby", "del": "del",
             "sadd": "sadd", "smembers": "smembers", "srem": "srem"}


def acl_commands(repo: Path) -> set:
    with (repo / ACL_FILE).open() as f:
        doc = hcl2.load(f)
    for block in doc.get("locals", []):
        if ACL_LOCAL in block:
            return {c.strip('"').lower() for c in block[ACL_LOCAL]}
    raise SystemExit(f"check_redis_acl: no local.{ACL_LOCAL} in {ACL_FILE}")


def lua_commands(repo: Path) -> tuple[dict, list]:
    """{command: [where]} of the scripts, and the calls whose command cannot be named."""
    used, unknown = {}, []
    for path in sorted((repo / LUA_DIR).rglob("*.lua")):
        text = "\n".join(re.sub(r"--.*", "", line) for line in path.read_text().splitlines())
        where = str(path.relative_to(repo))
        for m in LUA_PCALL_OF_CALL.finditer(text):
            if m.group(2):
                used.setdefault(m.group(2).lower(), []).append(where)
            else:
                unknown.append(f"{where}: pcall(redis.call, {m.group(3).strip()}")
        for m in LUA_CALL.finditer(text):
            if m.group(2):
                used.setdefault(m.group(2).lower(), []).append(where)
                continue
            table = m.group(3)
            first = table and re.search(rf"\blocal\s+{table}\s*=\s*\{{\s*(['\"])(\w+)\1", text)
            if first:
                used.setdefault(first.group(2).lower(), []).append(where)
            else:
                unknown.append(f"{where}: redis.call({(m.group(4) or 'unpack(' + str(table) + ')').strip()}")
    return used, unknown


def without_tests(text: str) -> str:
    """Rust source without its `#[cfg(test)] mod … { … }` blocks."""
    while (m := re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[:m.start()] + text[i:]
    return text


def rust_commands(repo: Path) -> dict:
    used, guest_calls = {}, set()
    interface_impls = []
    for d in RUST_DIRS:
        for path in sorted((repo / d).rglob("*.rs")):
            if "target" in path.parts or "tests" in path.relative_to(repo / d).parts:
                continue
            text = without_tests(path.read_text())
            if not re.search(r"\bredis::", text):
                continue
            where = str(path.relative_to(repo))
            if "spin_sdk::redis" in text:
                guest_calls |= {f for f in INTERFACE if re.search(rf"\.{f}\(", text)}
            for m in RUST_LITERAL.finditer(text):
                fn = re.findall(r"\bfn\s+(\w+)", text[:m.start()])
                if d == "host/src" and fn and fn[-1] in INTERFACE:
                    interface_impls.append((fn[-1], m.group(1).lower(), where))
                else:
                    used.setdefault(m.group(1).lower(), []).append(where)
    for fn, command, where in interface_impls:
        if fn in guest_calls:
            used.setdefault(command, []).append(f"{where} (a guest calls {fn})")
    return used


def check(repo: Path) -> tuple[list, list]:
    """(passed check names, failures)."""
    acl = acl_commands(repo)
    lua, unknown = lua_commands(repo)
    rust = rust_commands(repo)
    used = {}
    for source in (lua, rust):
        for c, where in source.items():
            used.setdefault(c, []).extend(where)
    results = []
    missing = [f"{c} (used in {', '.join(sorted(set(used[c])))}) is not in local.{ACL_LOCAL}" for c in sorted(set(used) - acl)]
    results.append(("every command the app runs is in the AWS root's Redis ACL", missing))
    results.append(("every redis.call names its command where this check can read it", unknown))
    if not lua or not rust:
        results.append(("the sources were found", [f"no commands found in {LUA_DIR if not lua else ', '.join(RUST_DIRS)}"]))
    extra = [f"{c} is in local.{ACL_LOCAL} but the app never runs it" for c in sorted(acl - set(used))]
    results.append(("the AWS root's Redis ACL grants no command the app does not run", extra))
    return results


def report(results, out: list, quiet: bool) -> tuple[int, int]:
    passed = failed = 0
    for name, problems in results:
        if problems:
            failed += 1
            out.extend(f"{name}: {p}" for p in problems)
            if not quiet:
                print(f"FAIL {name}")
                for p in problems:
                    print(f"     - {p}")
        else:
            passed += 1
            if not quiet:
                print(f"ok   {name}")
    return passed, failed


# (what, file, old, new, expected message fragment)
DEFECTS = [
    ("a script command missing from the ACL", "crates/domain/lua/archive_event.lua",
     "redis.call('SREM', K_ARCHIVED, A_EVENT)", "redis.call('SREM', K_ARCHIVED, A_EVENT)\n  redis.call('UNLINK', K_ARCHIVED)",
     "unlink (used in crates/domain/lua/archive_event.lua) is not in"),
    ("a command run through pcall missing from the ACL", "crates/domain/lua/archive_event.lua",
     "redis.call('SREM', K_ARCHIVED, A_EVENT)", "pcall(redis.call, \"SMOVE\", K_ARCHIVED, A_EVENT)",
     "smove (used in crates/domain/lua/archive_event.lua) is not in"),
    ("a command the check cannot name", "crates/domain/lua/archive_event.lua",
     "redis.call('SREM', K_ARCHIVED, A_EVENT)", "redis.call(command, K_ARCHIVED, A_EVENT)",
     "archive_event.lua: redis.call(command"),
    ("a command the Rust sends missing from the ACL", "crates/spin-edge/src/store.rs",
     '.execute("PING", &[])', '.execute("ECHO", &[])',
     "echo (used in crates/spin-edge/src/store.rs) is not in"),
    ("a command the ACL grants but the app never runs", ACL_FILE,
     '"del", "eval",', '"del", "flushall", "eval",',
     "flushall is in local.redis_app_commands but the app never runs it"),
]


def self_check(repo: Path) -> list:
    results = []
    with tempfile.TemporaryDirectory(prefix="check_redis_acl.") as tmp:
        base = Path(tmp) / "pristine"
        ignore = shutil.ignore_patterns("target", "node_modules", ".terraform")
        for d in (LUA_DIR, *RUST_DIRS):
            # The Lua lives inside a Rust folder (crates/domain/lua): copied with it.
            shutil.copytree(repo / d, base / d, ignore=ignore, dirs_exist_ok=True)
        (base / ACL_FILE).parent.mkdir(parents=True)
        shutil.copy(repo / ACL_FILE, base / ACL_FILE)
        failures = []
        report(check(base), failures, quiet=True)
        results.append(("self-check: an unmodified copy passes", failures))
        for i, (what, rel, old, new, expected) in enumerate(DEFECTS):
            copy = Path(tmp) / f"defect{i}"
            shutil.copytree(base, copy)
            text = (copy / rel).read_text()
            if old not in text:
                results.append((f"self-check: reports {what}", [f"{old!r} not found in {rel}"]))
                continue
            (copy / rel).write_text(text.replace(old, new, 1))
            failures = []
            report(check(copy), failures, quiet=True)
            hit = [f for f in failures if expected in f]
            results.append((f"self-check: reports {what}", [] if hit else [f"not reported (expected {expected!r}); got {failures}"]))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[2])
    ap.add_argument("--no-self-check", action="store_true")
    args = ap.parse_args()
    results = check(args.repo)
    if not args.no_self_check:
        results += self_check(args.repo)
    passed, failed = report(results, [], quiet=False)
    print(f"check_redis_acl: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
