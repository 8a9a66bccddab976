"""The dashboard's routes: what each path shows, who may act, and how errors read.

GET  /queues (the overview), /queue?name=Q, /jobs?queue=..., /job?d=D,
     /failures[?queue=Q] (all queues without one), /asof, /workers?queue=Q
POST /login, /logout, /failures/confirm, /failures/act, /queue/pause, /job/act (all
     but the first need a session and its CSRF token)
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable

from pinledger.dashboard import (
    failures_page,
    job_actions,
    jobs,
    overview,
    queue_pause,
    queues,
    schedules,
    workers,
)
from pinledger.dashboard.auth import COOKIE, SESSION_TTL_MS, TooManyLoginsError
from pinledger.dashboard.backend import Backend
from pinledger.dashboard.paging import PageTokenError
from pinledger.dashboard.render import asset, esc, fill, page, redirect, url
from pinledger.idl import pinlater
from pinledger.ledger.commands import Refused
from pinledger.ledger.descriptor import DescriptorError
from pinledger.projections.store import InvalidRegexError, StoreError
from pinledger.service.api.core import load_queue
from pinledger.service.api.errors import ProjectionBehindError
from pinledger.service.api.requests import idl_default
from pinledger.service.observability.web import WebRequest, WebResponse

log = logging.getLogger(__name__)

RETRY_ATTEMPTS = idl_default(pinlater.PinLaterRetryFailedJobsRequest, "attemptsToAllow", int)
_STATIC = {"/static/refresh.js": "text/javascript", "/static/style.css": "text/css"}
# What a visitor did wrong (a bad regex, descriptor, token, an unknown queue): the page
# says why, with 400.
_BAD_INPUT = (
    ValueError,
    DescriptorError,
    InvalidRegexError,
    PageTokenError,
    Refused,
    KeyError,
)


class Dashboard:
    """The pages, as the admin HTTP server calls them (observability/web.py)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._get: dict[str, Callable[[WebRequest, str | None], WebResponse]] = {
            "/": lambda r, u: redirect("/queues"),
            "/queues": self._queues,
            "/queue": self._queue,
            "/jobs": self._jobs,
            "/job": self._job,
            "/failures": self._failures,
            "/asof": self._asof,
            "/workers": self._workers,
            "/login": self._login_form,
        }

    def __call__(self, request: WebRequest) -> WebResponse | None:
        if request.method == "GET" and request.path in _STATIC:
            body = asset(request.path.lstrip("/")).encode()
            return WebResponse(
                200, _STATIC[request.path], body, (("Cache-Control", "max-age=300"),)
            )
        cookie = request.cookies.get(COOKIE)
        user = self.backend.sessions.user(cookie)
        csrf = self.backend.sessions.csrf_token(cookie) if user and cookie else ""
        try:
            if request.method == "GET" and request.path in self._get:
                return self._get[request.path](request, user)
            if request.method == "POST":
                return self._post(request, user, cookie)
        except _BAD_INPUT as exc:
            return page(
                "Not shown", f'<p class="error">{esc(exc)}</p>', user=user, csrf=csrf, status=400
            )
        except (StoreError, ProjectionBehindError) as exc:
            log.warning("dashboard %s: %s", request.path, exc)
            return page(
                "Not available",
                f'<p class="error">{esc(exc)}</p>',
                user=user,
                csrf=csrf,
                status=503,
            )
        except Exception as exc:
            if type(exc).__name__ == "PinLaterException":  # an unknown queue and the like
                text = getattr(exc, "message", str(exc))
                return page(
                    "Not shown",
                    f'<p class="error">{esc(text)}</p>',
                    user=user,
                    csrf=csrf,
                    status=400,
                )
            raise
        return None

    def _csrf(self, user: str | None, cookie: str | None) -> str:
        return self.backend.sessions.csrf_token(cookie) if user and cookie else ""

    # -- read-only pages ------------------------------------------------------------------

    def _queues(self, request: WebRequest, user: str | None) -> WebResponse:
        content = overview.overview(self.backend)
        return page(
            "Queues",
            content,
            user=user,
            csrf=self._csrf(user, request.cookies.get(COOKIE)),
            refresh=True,
        )

    def _queue(self, request: WebRequest, user: str | None) -> WebResponse:
        name = request.arg("name")
        csrf = self._csrf(user, request.cookies.get(COOKIE))
        content = queues.queue_detail(self.backend, name)
        row = load_queue(self.backend.api, name)
        return page(
            f"Queue {name}",
            queue_pause.panel(row, user, csrf)
            + workers.link(row.name)
            + schedules.section(self.backend, row.name)
            + content,
            user=user,
            csrf=csrf,
            refresh=True,
        )

    def _workers(self, request: WebRequest, user: str | None) -> WebResponse:
        name = request.arg("queue")
        return page(
            f"Workers of {name}",
            workers.workers_page(self.backend, name),
            user=user,
            csrf=self._csrf(user, request.cookies.get(COOKIE)),
            refresh=True,
        )

    def _jobs(self, request: WebRequest, user: str | None) -> WebResponse:
        args = {
            k: request.arg(k) for k in ("queue", "state", "priority", "body", "status", "after")
        }
        content = jobs.finder(self.backend, args)
        return page(
            "Find jobs", content, user=user, csrf=self._csrf(user, request.cookies.get(COOKIE))
        )

    def _job(self, request: WebRequest, user: str | None) -> WebResponse:
        d = request.arg("d")
        csrf = self._csrf(user, request.cookies.get(COOKIE))
        content = job_actions.panel(self.backend, d, user, csrf) + jobs.life(self.backend, d)
        return page(
            f"Job {d}",
            content,
            user=user,
            csrf=self._csrf(user, request.cookies.get(COOKIE)),
            refresh=True,
        )

    def _failures(self, request: WebRequest, user: str | None) -> WebResponse:
        csrf = self._csrf(user, request.cookies.get(COOKIE))
        content = failures_page.overview(
            self.backend, request.arg("queue"), request.arg("priority"), user, csrf
        )
        return page("Failures", content, user=user, csrf=csrf)

    def _asof(self, request: WebRequest, user: str | None) -> WebResponse:
        content = queues.as_of_page(
            self.backend,
            request.arg("queue"),
            request.arg("at"),
            request.arg("a"),
            request.arg("b"),
        )
        return page(
            "A queue in the past",
            content,
            user=user,
            csrf=self._csrf(user, request.cookies.get(COOKIE)),
        )

    def _login_form(
        self, request: WebRequest, user: str | None, error: str = "", status: int = 200
    ) -> WebResponse:
        enabled = self.backend.sessions.enabled
        content = fill(
            "login.html",
            {
                "error": f'<p class="error">{esc(error)}</p>' if error else "",
                "disabled": ""
                if enabled
                else '<p class="notice">No admin password is configured '
                "(PINLEDGER_ADMIN_PASSWORD_HASH): the dashboard is read-only.</p>",
            },
        )
        return page("Log in", content, user=user, status=status)

    # -- actions --------------------------------------------------------------------------

    def _post(
        self, request: WebRequest, user: str | None, cookie: str | None
    ) -> WebResponse | None:
        sessions = self.backend.sessions
        if request.path == "/login":
            try:
                issued = sessions.login(request.arg("password"), client=request.client)
            except TooManyLoginsError as exc:
                answer = self._login_form(request, None, f"{exc.args[0].capitalize()}.", 429)
                retry = ("Retry-After", str(math.ceil(exc.wait_s)))
                return dataclasses.replace(answer, headers=(*answer.headers, retry))
            if issued is None:
                return self._login_form(request, None, "Wrong password.", 403)
            cookie_header = (
                f"{COOKIE}={issued}; Path=/; HttpOnly; SameSite=Strict; "
                f"Max-Age={SESSION_TTL_MS // 1000}" + ("; Secure" if request.secure else "")
            )
            return redirect("/failures", (("Set-Cookie", cookie_header),))
        if request.path not in (
            "/logout",
            "/failures/confirm",
            "/failures/act",
            queue_pause.PATH,
            job_actions.PATH,
        ):
            return None
        if user is None or not sessions.check_csrf(cookie, request.arg("csrf")):
            return page(
                "Not allowed",
                '<p class="error">Log in with the admin password to do that '
                "(or the form was stale: reload it).</p>",
                user=user,
                status=403,
            )
        if request.path == "/logout":
            try:
                sessions.end(cookie)
            except StoreError as exc:
                return page(
                    "Not logged out",
                    '<p class="error">The session could not be ended on the server '
                    f"({esc(str(exc))}): try again when the store is back.</p>",
                    user=user,
                    status=503,
                )
            return redirect("/queues", (("Set-Cookie", f"{COOKIE}=; Path=/; Max-Age=0"),))
        csrf = sessions.csrf_token(cookie or "")
        if request.path == queue_pause.PATH:
            name = request.arg("name")
            said = queue_pause.set_paused(
                self.backend, user, name, request.arg("paused") == "yes", request.arg("reason")
            )
            content = (
                f'<p class="notice done">{esc(said)}</p>'
                f'<p><a href="{esc(url("/queue", name=name))}">back to the queue</a></p>'
            )
            return page("Done", content, user=user, csrf=csrf)
        if request.path == job_actions.PATH:
            d = request.arg("d")
            said = job_actions.act(self.backend, user, d, request.arg("what"), request.arg("state"))
            content = (
                f'<p class="notice done">{esc(said)}</p>'
                f'<p><a href="{esc(url("/job", d=d))}">back to the job</a></p>'
            )
            return page("Done", content, user=user, csrf=csrf)
        what = request.arg("what")
        if what not in ("retry-selected", "delete-selected", "retry-all", "delete-all"):
            raise ValueError(f"unknown action {what!r}")
        queue, priority, error = request.arg("queue"), request.arg("priority"), request.arg("error")
        chosen = request.args("job")
        if request.path == "/failures/confirm":
            content = failures_page.confirm(
                self.backend, what, queue, priority, error, chosen, csrf
            )
            return page("Confirm", content, user=user, csrf=csrf)
        if request.arg("confirmed") != "yes":
            raise ValueError("the action was not confirmed")
        done = failures_page.act(
            self.backend, user, what, queue, priority, error, chosen, RETRY_ATTEMPTS
        )
        verb = "retried" if what.startswith("retry") else "deleted"
        content = (
            f'<p class="notice done" data-jobs="{done}">{done:,} jobs {verb}, as events in the '
            f"ledger with source <code>dashboard:{esc(user)}</code>.</p>"
            f'<p><a href="/failures?queue={esc(queue)}">back to the failures</a></p>'
        )
        return page("Done", content, user=user, csrf=csrf)
