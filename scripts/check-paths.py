#!/usr/bin/env python3
"""Every path of this repository that a document, script, manifest, Terraform file or source
comment names exists: a file moved or renamed leaves no reader following a dead name.

A path is a token starting with one of the repository's top-level folders
(`host/src/trigger/serve.rs`, `tools/bench/`, `crates/domain/lua/buy.lua`) or with a folder beside
the file that names it (`src/spin_costs.rs` in host/README.md); a glob (`functions/*`) must
match something. Paths of
other repositories are told apart as they are written: inside a URL, or under `crates/` with a
crate name this repository does not have (Spin's `crates/trigger-http/src/server.rs`, cited
with its tag), or right after the other repository's name (`spin-operator api/v1alpha1/…`). A
path may be written from the folder of the file that names it (`aws/tests/plan.tfvars` in
infra/terraform/). Exits 1 listing each dead name with where it was written.
"""

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What is read: every tracked file of these kinds.
SCANNED = (".md", ".sh", ".py", ".tf", ".toml", ".yaml", ".yml", ".service", ".rs", ".js", ".lua")

# Generated or vendored text that names other repositories' layouts.
SKIPPED_DIRS = ("wit/deps/",)

# Repositories whose own paths our text cites after their name.
FOREIGN = ("spin-operator",)

# Tokens shaped like a path that are not one: rates (Redis scripts, orders per second).
NOT_PATHS = {"scripts/s", "orders/s"}


def exists(name, written_in):
    """`name` resolves from the root, or from the folder of the file it is written in or any
    folder above it."""
    folder = os.path.dirname(written_in)
    while True:
        if glob.glob(os.path.join(ROOT, folder, name)):
            return True
        if not folder:
            return False
        folder = os.path.dirname(folder)


def tracked():
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    return [p for p in out.decode().split("\0") if p]


def main():
    files = tracked()
    tops = sorted({p.split("/", 1)[0] for p in files if "/" in p})
    our_crates = {p.split("/")[1] for p in files if p.startswith("crates/")}
    folders = {os.path.dirname(p) for p in files}
    dead = []
    checked = 0
    for path in files:
        if not path.endswith(SCANNED) or path.startswith(SKIPPED_DIRS):
            continue
        # A top-level folder or one beside the file, then path characters; not inside a
        # longer word, path or URL.
        here = os.path.dirname(path)
        beside = {
            f[len(here) + 1 :].split("/", 1)[0]
            for f in folders
            if here and f.startswith(here + "/")
        }
        pattern = re.compile(
            r"(?<![\w./:@-])((?:%s)/[\w./*{}@-]*)"
            % "|".join(re.escape(t) for t in sorted(set(tops) | beside))
        )
        try:
            text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for m in pattern.finditer(line):
                name = m.group(1).rstrip(".")
                if "{" in name or "}" in name or name in NOT_PATHS:
                    continue  # a format string or a brace list, not a name
                if any(f in line[max(0, m.start() - 30) : m.start()] for f in FOREIGN):
                    continue
                parts = name.split("/")
                if parts[0] == "crates" and len(parts) > 1 and parts[1] not in our_crates:
                    continue  # another repository's crate (Spin's, cited with its tag)
                checked += 1
                if not exists(name, path):
                    dead.append(f"{path}:{n}: {name}")
    for d in dead:
        print(d)
    print(f"check-paths: {checked} paths named, {len(dead)} missing")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
