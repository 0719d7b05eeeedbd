#!/usr/bin/env python3
"""Writes spin.http.toml, the manifest every Spin platform accepts, from spin.toml.

spin.toml is for self-hosted Spin with the spin-trigger-cron plugin. SpinKube, Akamai Functions
and Fermyon Cloud take HTTP triggers only, so spin.http.toml is the same app without the cron
triggers and the components only they use; the scheduled work stays reachable at
POST /admin/jobs/{drain,timeout-release,reconcile} for the platform's scheduler, and the
poll-carried drain is on (the `poll` component's `poll_drain_ms` is 1000 instead of 0): with no scheduler
finer than a minute, the buyers waiting in the queue carry the drain.

  scripts/manifests.py           rewrite spin.http.toml
  scripts/manifests.py --check   exit 1 when spin.http.toml is not what spin.toml gives
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = (
    "# Generated from spin.toml by scripts/manifests.py: do not edit. The same app with HTTP\n"
    "# triggers only, for platforms without the cron plugin (SpinKube, Akamai Functions, Fermyon\n"
    "# Cloud); their scheduler calls POST /admin/jobs/{drain,timeout-release,reconcile}, and the\n"
    "# buyers' polls carry the drain in between (poll_drain_ms = 1000).\n"
)


def http_only(text):
    """spin.toml's paragraphs without the cron triggers and the components only they name."""
    paragraphs = text.split("\n\n")
    cron = [p for p in paragraphs if "[[trigger.cron]]" in p]
    cron_components = set(re.findall(r'^component = "([^"]+)"', "\n".join(cron), re.M))
    http = "\n".join(p for p in paragraphs if "[[trigger.http]]" in p)
    only_cron = {c for c in cron_components if f'component = "{c}"' not in http}

    def keep(p):
        headers = re.findall(r"^\[component\.([A-Za-z0-9_-]+)[\].]", p, re.M)
        return p not in cron and not any(h in only_cron for h in headers)

    text = "\n\n".join(p for p in paragraphs if keep(p)).rstrip("\n") + "\n"
    poll_drain = '\npoll_drain_ms = "0"\n'
    if text.count(poll_drain) != 1:
        sys.exit(f"spin.toml has no one `{poll_drain.strip()}` to turn on")
    return HEADER + "\n" + text.replace(poll_drain, '\npoll_drain_ms = "1000"\n')


def main():
    want = http_only((ROOT / "spin.toml").read_text())
    target = ROOT / "spin.http.toml"
    if sys.argv[1:] == ["--check"]:
        if not target.exists() or target.read_text() != want:
            print("spin.http.toml is stale: run scripts/manifests.py", file=sys.stderr)
            return 1
        return 0
    target.write_text(want)
    return 0


if __name__ == "__main__":
    sys.exit(main())
