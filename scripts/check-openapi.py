#!/usr/bin/env python3
"""Checks every request and response the test suite recorded against api/openapi.yaml.

The test harness (tests/src/lib.rs, `record_exchange`) appends each exchange to
$SECKILL_API_RECORD/<pid>.jsonl. The validator is openapi-core (a maintained OpenAPI 3.1
implementation), not our own code. Three rules:
  - every response matches the document (status, content type, body schema, no extra fields);
  - a request the server accepted (2xx) matches the request schema;
  - a JSON body the server refused as invalid input (400) does not: the document states the
    rules the server enforces.
Exits non-zero, listing the first failures, when any exchange breaks a rule.
"""

import json
import pathlib
import sys
from urllib.parse import parse_qs, urlsplit

from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
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


def request_errors(openapi, request):
    errors = []
    for cls in (V31RequestParametersValidator, V31RequestBodyValidator):
        validator = cls(openapi.spec)
        errors += [str(e) for e in validator.iter_errors(request)]
    return errors


def main():
    record = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target/api-record")
    openapi = OpenAPI.from_file_path(str(ROOT / "api/openapi.yaml"))
    exchanges = [
        json.loads(line)
        for f in sorted(record.glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    if not exchanges:
        print(f"check-openapi: no exchanges recorded in {record}", file=sys.stderr)
        return 1
    failures, seen = [], set()
    for x in exchanges:
        request = request_of(x)
        content_type = x.get("content_type") or ""
        response = MockResponse(
            x["response"].encode(),
            status_code=x["status"],
            content_type=content_type.split(";")[0].strip(),
        )
        where = f'{x["method"]} {x["path"]} -> {x["status"]}'
        problems = [str(e) for e in openapi.iter_response_errors(request, response)]
        if 200 <= x["status"] < 300:
            problems += [f"accepted request: {e}" for e in request_errors(openapi, request)]
        elif x["status"] == 400 and x.get("request") is not None:
            code = json.loads(x["response"]).get("error", {}).get("code", "")
            if code not in ("event_not_found",) and not request_errors(openapi, request):
                problems.append(f"refused ({code}) but valid by the document: {x['request']}")
        for p in problems:
            key = (where.split("?")[0], p[:200])
            if key not in seen:
                seen.add(key)
                failures.append(f"{where}\n    {p}")
    print(
        f"check-openapi: {len(exchanges)} exchanges, {len(failures)} distinct failures",
        file=sys.stderr,
    )
    for f in failures[:60]:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
