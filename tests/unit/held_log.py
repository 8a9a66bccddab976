"""A server's log whose next append waits until the test lets it go: a claim append in
flight, for the tests of what a stop or a second server does meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pinledger.ledger.log import Append, Log


class HeldLog:
    def __init__(self, log: Log) -> None:
        self._log = log
        self.entered = threading.Event()
        self.release = threading.Event()

    def append(self, appends: Sequence[Append]) -> list[int]:
        if not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30), "the test never let the append go"
        return self._log.append(appends)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)
