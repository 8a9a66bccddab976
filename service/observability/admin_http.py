"""The admin HTTP port, where PinLater served /stats.txt (on 9999).

GET /metrics    Prometheus text exposition 0.0.4
GET /stats.txt  the same numbers in Ostrich's plain-text layout
GET /health     liveness: {"status": "ok"|"failing", "checks": {...}, "progress": {...}}:
                200 when every check is "ok", else 503 naming what is wrong; the
                background loops (observability/health.py)
GET /ready      readiness, the same shape: the loops and every dependency (Kafka,
                Postgres); 503 while one is down, so a load balancer acts on the code.
                Partitions paused at a record no store commits are named under
                "paused" (with the command that skips the record) and leave the code
                as it is: the server's other partitions serve (decision 0032)

Any other path, GET or POST, goes to the pages when the server has them (the
dashboard, service/dashboard; observability/web.py is the interface).
"""

from __future__ import annotations

import hmac
import json
import logging
import ssl
import threading
from collections.abc import Callable, Mapping
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pinledger.service.observability.log_limit import RateLimitedLog
from pinledger.service.observability.metrics import Metrics
from pinledger.service.observability.web import Pages, WebRequest, WebResponse
from pinledger.service.security.tls import handshake, refusal

log = logging.getLogger(__name__)
_noise = RateLimitedLog(log)
# The admin port's TLS context, or None for plain http.
Tls = ssl.SSLContext | None

Health = Callable[[], Mapping[str, str]]
Progress = Callable[[], Mapping[str, float]]
# The largest form a page accepts (a bulk selection of a few thousand jobs fits).
MAX_FORM_BYTES = 1024 * 1024


class AdminHttpBase(ThreadingHTTPServer):
    """An admin port's HTTP server (a server's, and the host's of `serve --processes`),
    over TLS when given a context (service/security/tls.py): each connection's handshake runs on
    that connection's thread, so a slow client never holds up the others."""

    daemon_threads = True  # a scraper holding a connection must not block shutdown

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], tls: Tls
    ) -> None:
        super().__init__(address, handler)
        self.tls = tls

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        if self.tls is not None:
            try:
                request = handshake(request, self.tls)
                request.settimeout(None)
            except (OSError, ValueError) as exc:
                _noise.warning(
                    "admin http: refused a connection from %s: %s (the admin port speaks https)",
                    client_address[0],
                    refusal(exc),
                )
                self.shutdown_request(request)
                return
        super().process_request_thread(request, client_address)


class _Server(AdminHttpBase):
    def __init__(
        self,
        address: tuple[str, int],
        metrics: Metrics,
        health: Health,
        ready: Health,
        progress: Progress,
        pages: Pages | None,
        metrics_token: str = "",
        tls: Tls = None,
        paused: Health = dict,
    ) -> None:
        super().__init__(address, _Handler, tls)
        self.metrics_token = metrics_token
        self.metrics = metrics
        self.health = health
        self.ready = ready
        self.progress = progress
        self.pages = pages
        self.paused = paused


class AdminHandler(BaseHTTPRequestHandler):
    """What every admin HTTP handler of pinledger shares (a server's, and the host's of
    `serve --processes`): a text answer, and request lines at debug level."""

    def _reply(self, code: int, content_type: str, text: str) -> None:
        data = text.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _scrape_allowed(self, token: str) -> bool:
        """Whether a scrape of /metrics or /stats.txt may be answered: always without a
        configured token (Prometheus's convention), else only with `Authorization:
        Bearer <token>`; answers 401 when not."""
        if not token:
            return True
        given = self.headers.get("Authorization") or ""
        if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="pinledger metrics"')
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        body = b"a bearer token is needed (PINLEDGER_METRICS_TOKEN)\n"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return False

    def log_message(self, format: str, *args: Any) -> None:
        # http.server writes every request to stderr; scrapes every few seconds would
        # drown the service's own log.
        log.debug("admin http %s: " + format, self.address_string(), *args)


class _Handler(AdminHandler):
    def do_GET(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        path = urlsplit(self.path).path
        if path in ("/metrics", "/stats.txt") and not self._scrape_allowed(server.metrics_token):
            return
        if path == "/metrics":
            prometheus = server.metrics.prometheus()
            self._reply(200, "text/plain; version=0.0.4; charset=utf-8", prometheus)
        elif path == "/stats.txt":
            self._reply(200, "text/plain; charset=utf-8", server.metrics.stats_txt())
        elif path == "/health":
            self._health(server.health, server.progress)
        elif path == "/ready":
            self._health(server.ready, server.progress, server.paused)
        else:
            self._page(server, "GET", {})

    def do_POST(self) -> None:
        server = self.server
        assert isinstance(server, _Server)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM_BYTES:
            self._reply(413, "text/plain; charset=utf-8", "form too large\n")
            return
        text = self.rfile.read(length).decode("utf-8", errors="replace")
        self._page(server, "POST", parse_qs(text, keep_blank_values=True))

    def _page(self, server: _Server, method: str, form: dict[str, list[str]]) -> None:
        parts = urlsplit(self.path)
        answer: WebResponse | None = None
        if server.pages is not None:
            cookies: dict[str, str] = {}
            try:
                jar = SimpleCookie(self.headers.get("Cookie") or "")
                cookies = {name: morsel.value for name, morsel in jar.items()}
            except CookieError:
                pass
            request = WebRequest(
                method=method,
                path=parts.path,
                query=parse_qs(parts.query, keep_blank_values=True),
                form=form,
                cookies=cookies,
                client=self.client_address[0],
                secure=server.tls is not None,
            )
            try:
                answer = server.pages(request)
            except Exception:
                log.exception("page %s %s failed", method, parts.path)
                answer = WebResponse(500, "text/plain; charset=utf-8", b"internal error\n")
        if answer is None:
            self._reply(404, "text/plain; charset=utf-8", f"no such page: {parts.path}\n")
            return
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        for name, value in answer.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(answer.body)

    def _health(self, health: Health, progress: Progress, paused: Health = dict) -> None:
        body: dict[str, Any]
        try:
            checks = dict(health())
            # Named, not failed: a load balancer keeps sending this server the calls of
            # its other partitions (decision 0032).
            stopped = dict(paused())
        except Exception as e:  # a check that cannot even run is a failing server
            log.warning("health check raised", exc_info=True)
            body = {"status": "failing", "checks": {}, "error": f"{type(e).__name__}: {e}"}
        else:
            ok = all(v == "ok" for v in checks.values())
            body = {"status": "ok" if ok else "failing", "checks": checks}
            seconds = dict(progress())
            if seconds:
                body["progress"] = seconds
            if stopped:
                body["paused"] = stopped
        code = 200 if body["status"] == "ok" else 503
        self._reply(code, "application/json", json.dumps(body, sort_keys=True) + "\n")


class AdminHttpServer:
    """Binds in __init__, so a taken port fails at construction and `port` is known
    (port 0 picks a free one) before start."""

    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        health: Health,
        ready: Health | None = None,
        progress: Progress = dict,
        pages: Pages | None = None,
        metrics_token: str = "",
        tls: Tls = None,
        paused: Health = dict,
    ) -> None:
        """`tls`: the port speaks https (service/security/tls.py admin_context). `paused`: the
        partitions paused at a record, named by /ready."""
        self._server = _Server(
            (host, port),
            metrics,
            health,
            ready or health,
            progress,
            pages,
            metrics_token,
            tls,
            paused,
        )
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="admin-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        # shutdown() waits for serve_forever to notice, and would wait forever if it never ran.
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
