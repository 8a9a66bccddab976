"""A JSON file an operator edits while the servers run (the queue config, the store's
shard map): read at start, where a broken or missing file refuses the start, then re-read
within `interval_s` of a change. A broken edit is logged once and the previous contents
stay in force; an edit that parses to what is in force already changes nothing.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class WatchedFile(Generic[T]):
    """`parse` turns the file's bytes into a value or raises `error`; `on_change` is
    called with the first value too, so callers have one path that applies one. path
    None means no file: `default`, never reloaded."""

    def __init__(
        self,
        path: Path | None,
        parse: Callable[[bytes], T],
        default: T,
        on_change: Callable[[T], None],
        what: str,
        error: type[Exception],
        log: logging.Logger,
        interval_s: float = 1.0,
    ) -> None:
        self._path = path
        self._parse = parse
        self._on_change = on_change
        self._what = what
        self._error = error
        self._log = log
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._current = default
        self._content: bytes | None = None
        # The file's identity when last read, good or bad, so an unchanged broken file is
        # not re-parsed and re-logged every interval (_identity).
        self._seen: tuple[int, int, int, int] | None = None
        self._missing = False
        if path is not None:
            try:
                stat = path.stat()
                content = path.read_bytes()
            except OSError as e:
                raise error(f"cannot read {what} {path}: {e}") from e
            self._current = parse(content)
            self._content, self._seen = content, _identity(stat)
        on_change(self._current)

    @property
    def current(self) -> T:
        return self._current

    def check(self) -> bool:
        """Reload if the file changed; True when a new value was applied."""
        if self._path is None:
            return False
        try:
            seen = _identity(self._path.stat())
            if seen == self._seen:
                return False
            content = self._path.read_bytes()
        except OSError as e:
            if not self._missing:
                self._log.warning(
                    "cannot read %s %s (%s); the previous config stays in force",
                    self._what,
                    self._path,
                    e,
                )
                self._missing, self._seen = True, None
            return False
        self._missing, self._seen = False, seen
        if content == self._content:
            return False
        try:
            value = self._parse(content)
        except self._error as e:
            self._log.warning(
                "%s %s is broken: %s; the previous config stays in force",
                self._what,
                self._path,
                e,
            )
            return False
        self._content = content
        if value == self._current:  # e.g. only whitespace changed
            return False
        self._current = value
        self._on_change(value)
        return True

    def start(self) -> None:
        if self._path is None or self._thread is not None:
            return
        name = self._what.replace(" ", "-")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.check()
            except Exception:  # an on_change failure must not end reloading for good
                self._log.exception("applying the %s %s failed", self._what, self._path)


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a new version of the file from the one last read. The inode too, not
    only mtime and size: a file replaced by a rename (an editor's save, the kubelet
    swapping a mounted ConfigMap's `..data` link to a new folder: `path.stat()`
    follows the links) is a new inode even when its size and mtime are the old ones'."""
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)
