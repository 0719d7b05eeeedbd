#!/usr/bin/env python3
"""The shop's side of the order events, for the tests and the demo: an endpoint that receives
Standard Webhooks deliveries and verifies each with the specification's reference library
(`standardwebhooks` on PyPI), as a shop's endpoint would, never with seckill's own code.

    receiver.py            listens on a free loopback port; prints "listening <port>" once ready
    receiver.py --tls ADDRESS CERT KEY
                           also takes deliveries over HTTPS on a free port of ADDRESS (CERT and
                           KEY in PEM), as a shop's public endpoint does; prints
                           "listening <port> <tls port>"

Controlled by the test over HTTP (JSON):
    PUT /secrets    ["whsec_…", …]           the secrets it holds (a delivery verifies with any)
    PUT /behaviour  {"status": 500, "times": 2}  answer the next `times` deliveries so
    GET /received   every delivery: {"id", "type", "order_id", "verified", "answered", "error"}
Any other POST is a delivery: verified, recorded, answered 204 (or as told), 400 when the
signature does not verify.
"""

import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

lock = threading.Lock()
state = {"secrets": [], "behaviour": [], "received": []}


def verify(body, headers):
    """The payload if one of the held secrets verifies it, else the last library error."""
    error = "no secret held"
    for secret in state["secrets"]:
        try:
            return Webhook(secret).verify(body, headers), None
        except WebhookVerificationError as e:
            error = str(e)
    return None, error


class Handler(BaseHTTPRequestHandler):
    def _body(self):
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _answer(self, status, payload=None):
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        value = json.loads(self._body())
        with lock:
            if self.path == "/secrets":
                state["secrets"] = list(value)
            elif self.path == "/behaviour":
                state["behaviour"] = [value["status"]] * int(value["times"])
            else:
                return self._answer(404, {"error": "no such control"})
        self._answer(200, {"ok": True})

    def do_GET(self):
        if self.path != "/received":
            return self._answer(404, {"error": "no such control"})
        with lock:
            self._answer(200, state["received"])

    def do_POST(self):
        body = self._body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        with lock:
            payload, error = verify(body, headers)
            status = 400 if payload is None else 204
            if payload is not None and state["behaviour"]:
                status = state["behaviour"].pop(0)
            data = (payload or {}).get("data", {})
            state["received"].append({
                "id": headers.get("webhook-id"),
                "type": (payload or {}).get("type"),
                "order_id": data.get("order_id"),
                "verified": payload is not None,
                "answered": status,
                "error": error,
            })
        self._answer(status)

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ports = [server.server_address[1]]
    if sys.argv[1:2] == ["--tls"]:
        address, cert, key = sys.argv[2:5]
        tls = ThreadingHTTPServer((address, 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        tls.socket = context.wrap_socket(tls.socket, server_side=True)
        ports.append(tls.server_address[1])
        threading.Thread(target=tls.serve_forever, daemon=True).start()
    print("listening " + " ".join(map(str, ports)), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
