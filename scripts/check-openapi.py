#!/usr/bin/env python3
"""Checks every request and response the test suite recorded against api/openapi.yaml.

The test kit (tools/testkit/src/record.rs, `record_exchange`) appends each exchange to
$SECKILL_API_RECORD/<pid>.jsonl. The validator is openapi-core (a maintained OpenAPI 3.1
implementation), not our own code. Three rules:
  - every response matches the document (status, content type, body schema, no extra fields);
  - a request the server accepted (2xx) matches the request schema;
  - a JSON body the server refused as invalid input (400) does not: the document states the
    rules the server enforces. The only exceptions are the rules that tie fields together,
    which the document lists by their refusal message in `x-refused-beyond-schema`.
Three conventions the document states in prose are applied here: a path no route matches gets
an empty-bodied 404 (Spin's, before any function runs), a path in another spelling than its
canonical one (`//admin`) a 404, and a method a route does not take gets the 405 every
operation of that path documents (with its `Allow`).
Identical exchanges are checked once, and of each kind (method, route, status, error code) at
most PER_KIND, spread evenly over the kind: the load tests send the same few kinds tens of
thousands of times (admission, precheck and sold-out buys are ~95 % of a run), and checking
each repeat took minutes of the test command's budget for nothing a thousand of them miss.
Exits non-zero, listing the first failures, when any exchange breaks a rule.
"""

import json
import multiprocessing
import os
import pathlib
import sys
from urllib.parse import parse_qs, urlsplit

import yaml

from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from openapi_core.validation.request.exceptions import MissingRequestBody
from openapi_core.validation.request.validators import (
    V31RequestBodyValidator,
    V31RequestParametersValidator,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SERVER = "http://127.0.0.1:3000"


def request_of(x):
    url = urlsplit(x["path"])
    body = x.get("request")
    return MockRequest(
        SERVER,
        x["method"].lower(),
        url.path,
        args={k: v[-1] for k, v in parse_qs(url.query).items()},
        headers={"Authorization": "Bearer recorded"},
        data=None if body is None else json.dumps(body).encode(),
        content_type="application/json",
    )


def template_of(paths, path):
    """The document's path template matching `path`, if any."""
    segments = path.strip("/").split("/")
    for template in paths:
        parts = template.strip("/").split("/")
        if len(parts) == len(segments) and all(
            p.startswith("{") or p == s for p, s in zip(parts, segments)
        ):
            return template
    return None


def documented_method(paths, path):
    """A method the document lists for the path template matching `path`, if any."""
    template = template_of(paths, path)
    if template is None:
        return None
    return next((m for m in ("get", "post", "put", "patch") if m in paths[template]), None)


PER_KIND = 1000


def kind_of(paths, x):
    """An exchange's kind: method, route (or the raw path), status and error code."""
    path = urlsplit(x["path"]).path
    try:
        body = json.loads(x["response"]) if x["response"] else {}
    except ValueError:
        body = {}
    code = body.get("error", {}).get("code", "") if isinstance(body, dict) else ""
    return (x["method"], template_of(paths, path) or path, x["status"], code)


def sample(paths, exchanges):
    """At most PER_KIND exchanges of each kind, evenly spaced over it (every one when fewer)."""
    kinds = {}
    for x in exchanges:
        kinds.setdefault(kind_of(paths, x), []).append(x)
    return [
        x
        for same in kinds.values()
        for x in (same if len(same) <= PER_KIND else same[:: -(-len(same) // PER_KIND)])
    ]


def beyond_schema(node):
    """Every message listed under `x-refused-beyond-schema` anywhere in the document."""
    if isinstance(node, dict):
        found = set(node.get("x-refused-beyond-schema", []))
        for v in node.values():
            found |= beyond_schema(v)
        return found
    if isinstance(node, list):
        return set().union(*map(beyond_schema, node)) if node else set()
    return set()


DOCUMENT = ROOT / "api/openapi.yaml"
STATE = {}


def start_worker():
    """Each worker process loads the document and its validators once."""
    openapi = OpenAPI.from_file_path(str(DOCUMENT))
    document = yaml.safe_load(DOCUMENT.read_text())
    STATE.update(
        openapi=openapi,
        paths=document["paths"],
        unstated=beyond_schema(document),
        request_validators=[
            cls(openapi.spec)
            for cls in (V31RequestParametersValidator, V31RequestBodyValidator)
        ],
    )


def request_errors(request):
    # openapi-core's body validator reports an optional body left out as an error (the
    # admission's proof of work is optional): only a missing *required* body is one.
    return [
        str(e)
        for v in STATE["request_validators"]
        for e in v.iter_errors(request)
        if type(e) is not MissingRequestBody
    ]


def problems_of(x):
    """(where, problem) pairs for one exchange, by the three rules and the two conventions."""
    raw = x["path"].split("?")[0]
    if "//" in raw or any(s in (".", "..") for s in raw.split("/")):
        # A path in another spelling than its canonical one: the document's convention is a 404.
        if x["status"] != 404:
            return [(f'{x["method"]} {raw} -> {x["status"]}', "non-canonical path served")]
        return []
    path = urlsplit(x["path"]).path
    known = documented_method(STATE["paths"], path)
    if known is None:
        if x["status"] != 404 or x["response"]:
            return [(f'{x["method"]} {path} -> {x["status"]}', "undocumented path")]
        return []  # an unmatched path: Spin's empty 404
    if x["status"] == 405:
        x = dict(x, method=known)  # the 405 documented by the path's own operations
    request = request_of(x)
    content_type = x.get("content_type") or ""
    response = MockResponse(
        x["response"].encode(),
        status_code=x["status"],
        headers={"Allow": x["allow"]} if x.get("allow") else {},
        content_type=content_type.split(";")[0].strip(),
    )
    where = f'{x["method"]} {x["path"]} -> {x["status"]}'
    problems = [str(e) for e in STATE["openapi"].iter_response_errors(request, response)]
    if 200 <= x["status"] < 300:
        problems += [f"accepted request: {e}" for e in request_errors(request)]
    elif x["status"] == 400 and x.get("request") is not None:
        error = json.loads(x["response"]).get("error", {})
        code, message = error.get("code", ""), error.get("message", "")
        exempt = code == "event_not_found" or message in STATE["unstated"]
        if not exempt and not request_errors(request):
            problems.append(f"refused ({code}) but valid by the document: {x['request']}")
    return [(where, p) for p in problems]


def check(chunk):
    return [found for x in chunk for found in problems_of(x)]


def main():
    record = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target/api-record")
    lines = {
        line
        for f in sorted(record.glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    }
    if not lines:
        print(f"check-openapi: no exchanges recorded in {record}", file=sys.stderr)
        return 1
    exchanges = [json.loads(line) for line in sorted(lines)]
    paths = yaml.safe_load(DOCUMENT.read_text())["paths"]
    checked = sample(paths, exchanges)
    # The validator is slow (a few ms an exchange), so the work is spread over every core.
    workers = os.cpu_count() or 1
    chunks = [checked[i::workers * 8] for i in range(workers * 8)]
    with multiprocessing.Pool(workers, initializer=start_worker) as pool:
        found = [f for part in pool.map(check, chunks) for f in part]
    failures, seen = [], set()
    for where, problem in found:
        key = (where.split("?")[0], problem[:200])
        if key not in seen:
            seen.add(key)
            failures.append(f"{where}\n    {problem}")
    print(
        f"check-openapi: {len(exchanges)} distinct exchanges, {len(checked)} checked (at most"
        f" {PER_KIND} of each kind), {len(failures)} distinct failures",
        file=sys.stderr,
    )
    for f in failures[:60]:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
