"""The chaos load through the project's own client, as a user would write it: one
`PinLaterClient` shared by the load's threads, its servers read from a server-list file
(PinLater's format, one `host:port` a line) that the test rewrites when servers come
and go, as an operator does during a rolling restart.

Whatever the client hides (a refused connection, a pooled connection its server
closed, an idempotent call retried on the next server) is not a failure here; what it
raises is, and is recorded with what it said (tests/chaos/load.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pinledger.client import Job, PinLaterClient, PinLaterError, ServerList, ServerUnavailableError
from pinledger.service.testing.servers import ServerProcess
from tests.chaos.load import ATTEMPTS, CALL_TIMEOUT_MS, Caller, Traffic

# How often the client looks at the server-list file (its default is 1 s): a new
# server is used, a stopped one dropped, within this of the file's change.
LIST_CHECK_S = 0.2


class ClientLoad(Traffic):
    """The load (tests/chaos/load.py `Traffic`) through one PinLaterClient whose
    server list is the file `list_dir`/servers.txt, naming `servers`. `timeout_s`: the
    client's bound on a call (a frozen server answers nothing; past it the client gives
    up on the call, and retries it elsewhere when it is safe to repeat)."""

    def __init__(
        self,
        servers: Sequence[ServerProcess],
        queue: str,
        list_dir: Path,
        *,
        timeout_s: float = CALL_TIMEOUT_MS / 1000,
        **options: Any,
    ) -> None:
        super().__init__(queue, **options)
        self.list_path = list_dir / "servers.txt"
        self.serve_from(servers)
        self.client = PinLaterClient(
            ServerList.from_file(self.list_path, check_interval_s=LIST_CHECK_S),
            source="chaos:client",
            timeout_s=timeout_s,
        )

    def serve_from(self, servers: Sequence[ServerProcess]) -> None:
        """Rewrite the server-list file to name `servers` (whole, at once: a reader
        never sees half a file)."""
        text = "".join(f"{server.host}:{server.port}\n" for server in servers)
        scratch = self.list_path.with_suffix(".new")
        scratch.write_text(text)
        os.replace(scratch, self.list_path)

    def caller(self, turn: int) -> Caller:
        return ClientCaller(self.client)

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self.client.close()


class ClientCaller:
    """A thread's calls on the shared client: it chooses the server (round robin over
    the list, skipping what it cannot reach), so a failure needs nothing of this."""

    def __init__(self, client: PinLaterClient) -> None:
        self.client = client

    def enqueue(self, queue: str, bodies: list[bytes], source: str) -> list[str]:
        return self.client.enqueue(queue, [Job(b, attempts_allowed=ATTEMPTS) for b in bodies])

    def dequeue(self, queue: str, limit: int, source: str) -> dict[str, bytes]:
        return {job.descriptor: job.body for job in self.client.dequeue(queue, limit)}

    def ack(self, queue: str, descriptors: list[str], source: str) -> None:
        self.client.ack(queue, succeeded=descriptors)

    def retryable(self, exc: Exception) -> bool:
        if isinstance(exc, PinLaterError):
            return exc.transient
        return isinstance(exc, ServerUnavailableError)

    def failed(self) -> None:
        pass

    def close(self) -> None:
        pass
