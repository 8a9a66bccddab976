"""The supervisor's admin port: the host's one /health, /ready, /metrics and
/stats.txt, put together from its workers' admin ports (merge.py); every other path
(the dashboard) is passed to the first worker running."""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping

from pinledger.exposition import merge_prometheus
from pinledger.service.observability.admin_http import AdminHandler, AdminHttpBase, Tls
from pinledger.service.processes.merge import WorkerView, host_health, merge_stats_txt

log = logging.getLogger(__name__)

_ASK_TIMEOUT_S = 3.0
# Headers passed through the dashboard proxy, each way.
_REQUEST_HEADERS = ("Content-Type", "Cookie", "Accept")
_ANSWER_HEADERS = ("Content-Type", "Set-Cookie", "Location", "Cache-Control")

Workers = Callable[[], list[WorkerView]]


def ask(
    host: str, port: int, path: str, token: str = "", tls: ssl.SSLContext | None = None
) -> tuple[int, str]:
    """GET a worker's admin path (with the metrics token, when one is set; over https
    with `tls`): (status, body); status 0 when it did not answer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    scheme = "http" if tls is None else "https"
    request = urllib.request.Request(f"{scheme}://{host}:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=_ASK_TIMEOUT_S, context=tls) as r:
            return r.status, r.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return 0, f"no answer: {exc}"


def _summary(status: int, body: str) -> str:
    """A failing worker's /health in one line: its failing checks, or why it is silent."""
    if status == 0:
        return body
    try:
        checks = json.loads(body).get("checks", {})
    except ValueError:
        return f"HTTP {status}"
    failing = [f"{name}: {value}" for name, value in checks.items() if value != "ok"]
    return f"HTTP {status}: " + ("; ".join(failing) or "failing")


def _paused(answers: Mapping[int, tuple[int, str]]) -> dict[str, str]:
    """The partitions the workers' /ready name as paused (decision 0032), together:
    each partition has one owner, so no name is given twice."""
    found: dict[str, str] = {}
    for status, body in answers.values():
        if status == 0:
            continue
        try:
            paused = json.loads(body).get("paused", {})
        except (ValueError, AttributeError):
            continue
        if isinstance(paused, dict):
            found.update({str(k): str(v) for k, v in paused.items()})
    return found


class _Server(AdminHttpBase):
    def __init__(
        self,
        address: tuple[str, int],
        workers: Workers,
        worker_host: str,
        metrics_token: str,
        tls: Tls,
        workers_tls: Tls,
    ) -> None:
        super().__init__(address, _Handler, tls)
        self.workers_tls = workers_tls
        self.workers = workers
        self.worker_host = worker_host
        self.metrics_token = metrics_token

    def each(self, path: str) -> dict[int, tuple[int, str]]:
        """Every running worker's answer to GET `path`, asked at once."""
        running = [w for w in self.workers() if w.pid is not None]
        answers: dict[int, tuple[int, str]] = {}

        def one(worker: WorkerView) -> None:
            answers[worker.index] = ask(
                self.worker_host, worker.admin_port, path, self.metrics_token, self.workers_tls
            )

        threads = [threading.Thread(target=one, args=(w,), daemon=True) for w in running]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return answers


class _Handler(AdminHandler):
    def do_GET(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/ready"):
            answers = server.each(path)
            summaries = {
                i: (status, _summary(status, body)) for i, (status, body) in answers.items()
            }
            code, body = host_health(server.workers(), summaries)
            paused = _paused(answers) if path == "/ready" else {}
            if paused:
                body["paused"] = paused
            self._reply(code, "application/json", json.dumps(body, sort_keys=True) + "\n")
        elif path in ("/metrics", "/stats.txt"):
            if not self._scrape_allowed(server.metrics_token):
                return
            texts = {i: body for i, (status, body) in server.each(path).items() if status == 200}
            merge = merge_prometheus if path == "/metrics" else merge_stats_txt
            kind = "text/plain; version=0.0.4; charset=utf-8" if path == "/metrics" else None
            self._reply(200, kind or "text/plain; charset=utf-8", merge(texts))
        else:
            self._proxy(server, "GET", b"")

    def do_POST(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        length = int(self.headers.get("Content-Length") or 0)
        self._proxy(server, "POST", self.rfile.read(length))

    def _proxy(self, server: _Server, method: str, body: bytes) -> None:
        """The dashboard lives in every worker; the first running one serves it (its
        sessions are its own: a restart of that worker asks for a new login)."""
        running = [w for w in server.workers() if w.pid is not None]
        if not running:
            self._reply(503, "text/plain; charset=utf-8", "no server process is running\n")
            return
        headers = {k: v for k in _REQUEST_HEADERS if (v := self.headers.get(k)) is not None}
        where = (server.worker_host, running[0].admin_port)
        conn = (
            http.client.HTTPConnection(*where, timeout=_ASK_TIMEOUT_S * 10)
            if server.workers_tls is None
            else http.client.HTTPSConnection(
                *where, timeout=_ASK_TIMEOUT_S * 10, context=server.workers_tls
            )
        )
        try:
            conn.request(method, self.path, body=body or None, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
        except OSError as exc:
            self._reply(502, "text/plain; charset=utf-8", f"the server process: {exc}\n")
            return
        finally:
            conn.close()
        self.send_response(answer.status)
        for name in _ANSWER_HEADERS:
            for value in answer.headers.get_all(name) or []:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class HostAdminServer:
    """Binds in __init__ (a taken port fails at once; port 0 picks a free one)."""

    def __init__(
        self,
        host: str,
        port: int,
        workers: Workers,
        worker_host: str,
        metrics_token: str = "",
        tls: Tls = None,
        workers_tls: Tls = None,
    ) -> None:
        """`metrics_token`: what /metrics and /stats.txt ask of a scraper, and what
        this server gives the workers when it asks them for theirs. `tls`: this port
        speaks https; `workers_tls`: so do the workers' (service/security/tls.py own_context)."""
        self._server = _Server((host, port), workers, worker_host, metrics_token, tls, workers_tls)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="host-admin-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        # shutdown() waits for serve_forever to return: it would wait for good on a
        # server never started (a supervisor stopping before it served).
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()
