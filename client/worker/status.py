"""The status port of `pinledger worker`: `/health` and `/metrics` over HTTP, for an
orchestrator's probes and a Prometheus scrape.

/health answers 200 with `{"status": "ok", ...}` while the worker dequeues, and 503
with `"stopping"` once it stops (a signal, or its run ended), so that a probe never
counts a draining worker as working. A worker whose dequeues fail (the servers are down
or refuse) stays 200, since restarting it would not help, and says so: `"server"` is
`"answering"`, or the error of the failing dequeues with how long ago a server last
answered (pinledger_worker_server_answering is 0 meanwhile).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pinledger.client.worker.loop import Worker
from pinledger.client.worker.metrics import Reading, render

log = logging.getLogger("pinledger.worker")


def reading(worker: Worker) -> Reading:
    counters = worker.counters
    return Reading(
        queue=worker.queue,
        outcomes=counters.by_outcome(),
        handler_seconds=counters.handler_seconds,
        runs=counters.processed,
        in_flight=worker.in_flight,
        answering=worker.failing is None,
    )


def health(worker: Worker) -> tuple[int, dict[str, Any]]:
    """The status code and body of /health."""
    if worker.failing is None:
        server = "answering"
    else:
        since = worker.answered_at
        ago = (
            "no server has answered yet"
            if since is None
            else f"a server last answered {worker.clock.monotonic() - since:.0f} s ago"
        )
        server = f"{worker.failing} ({ago})"
    body = {
        "status": "ok" if worker.working else "stopping",
        "queue": worker.queue,
        "in_flight": worker.in_flight,
        "concurrency": worker.concurrency,
        "processed": worker.counters.processed,
        "server": server,
    }
    return (200 if worker.working else 503), body


# path -> its answer: (HTTP status, content type, body)
Routes = dict[str, Callable[[], tuple[int, str, str]]]
JSON = "application/json"
PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


def worker_routes(worker: Worker) -> Routes:
    """/health and /metrics of one worker."""

    def health_page() -> tuple[int, str, str]:
        code, body = health(worker)
        return code, JSON, json.dumps(body) + "\n"

    return {
        "/health": health_page,
        "/metrics": lambda: (200, PROMETHEUS, render([reading(worker)])),
    }


class StatusServer:
    """Serves `routes` on (host, port) from a daemon thread; port 0 picks a free one
    (`port` says which)."""

    def __init__(self, routes: Routes, host: str, port: int) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a probe every few seconds is not news

        self.routes = routes
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="worker-status", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        route = self.routes.get(request.path.split("?", 1)[0])
        if route is None:
            known = " and ".join(sorted(self.routes))
            code, kind, text = 404, "text/plain", f"not found: {known} are\n"
        else:
            code, kind, text = route()
        data = text.encode()
        request.send_response(code)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)
