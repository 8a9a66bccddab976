"""Pages served beside the admin endpoints (the dashboard, service/dashboard): the
request as the admin HTTP server parsed it and the response it sends back. The admin
server knows nothing of the pages; it hands them every path it does not serve itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class WebRequest:
    method: str  # GET or POST
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    form: dict[str, list[str]] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    client: str = ""
    # Over TLS: cookies may say Secure.
    secure: bool = False

    def arg(self, name: str, default: str = "") -> str:
        """The first value of a query (GET) or form (POST) field, stripped."""
        values = self.form.get(name) or self.query.get(name) or [default]
        return values[0].strip()

    def args(self, name: str) -> list[str]:
        return self.form.get(name) or self.query.get(name) or []


@dataclass(frozen=True, slots=True)
class WebResponse:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


# None: the path is not one of the pages (the admin server answers 404).
Pages = Callable[[WebRequest], WebResponse | None]
