"""HTML out of the templates shipped beside this package (string.Template: `$name`
placeholders, filled with text escaped here or with fragments built by the pages)."""

from __future__ import annotations

import functools
import html
from collections.abc import Iterable, Mapping
from importlib import resources
from string import Template
from urllib.parse import urlencode

from pinledger.ledger.times import format_ms
from pinledger.service.observability.web import WebResponse

HTML = "text/html; charset=utf-8"


@functools.cache
def asset(name: str) -> str:
    """A file of templates/ or static/, read once."""
    return (resources.files("pinledger.dashboard") / name).read_text(encoding="utf-8")


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def url(path: str, **params: object) -> str:
    """A link with its query, parameters that are None or empty left out."""
    kept = {k: str(v) for k, v in params.items() if v is not None and str(v) != ""}
    return path + ("?" + urlencode(kept) if kept else "")


def when(ms: int | None) -> str:
    return format_ms(ms)


def duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], css: str = "") -> str:
    """A table of fragments (cells are HTML already)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def body_text(body: bytes, limit: int = 2000) -> tuple[str, str]:
    """("text"|"hex", the body shown): text when it decodes as UTF-8, hex otherwise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        shown = body[: limit // 2].hex(" ")
        return "hex", shown + (" …" if len(body) > limit // 2 else "")
    return "text", text[:limit] + ("…" if len(text) > limit else "")


def page(
    title: str,
    content: str,
    *,
    user: str | None,
    csrf: str = "",
    refresh: bool = False,
    status: int = 200,
    headers: tuple[tuple[str, str], ...] = (),
) -> WebResponse:
    """A whole page: the layout around `content`."""
    who = (
        f'<form method="post" action="/logout" class="inline">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        f"{esc(user)} <button>log out</button></form>"
        if user
        else '<a href="/login">log in</a>'
    )
    text = Template(asset("templates/layout.html")).substitute(
        title=esc(title),
        content=content,
        who=who,
        refresh="on" if refresh else "off",
    )
    return WebResponse(status, HTML, text.encode("utf-8"), headers)


def fill(template: str, values: Mapping[str, object]) -> str:
    """A page template's fragment; values are HTML already."""
    return Template(asset(f"templates/{template}")).substitute(
        {k: str(v) for k, v in values.items()}
    )


def redirect(location: str, headers: tuple[tuple[str, str], ...] = ()) -> WebResponse:
    return WebResponse(303, HTML, b"", (("Location", location), *headers))
