"""Reads ahead of a consumer in a thread of its own: the verify (projections/verify.py)
waits for the log's fetches and for Postgres's sort while it could be folding; a
thread that pulls each stream into a bounded queue lets those waits overlap the fold
(the waits release the GIL; the fold holds it)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar, cast

T = TypeVar("T")

# Items handed over at once (one queue operation per chunk, not per item).
CHUNK = 500
# Chunks read ahead at most: what bounds the memory of a prefetch.
DEPTH = 8
_DONE = object()


class Prefetched(Generic[T]):
    """Iterates `source` in a thread, `CHUNK` items at a time, at most `DEPTH` chunks
    ahead. An error of the source is raised to the consumer; `close()` stops the
    thread (and closes the source, in the thread that runs it)."""

    def __init__(self, source: Iterable[T], name: str) -> None:
        self._queue: queue.Queue[object] = queue.Queue(DEPTH)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(source,), name=f"prefetch {name}", daemon=True
        )
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, source: Iterable[T]) -> None:
        iterator = iter(source)
        try:
            chunk: list[T] = []
            for item in iterator:
                chunk.append(item)
                if len(chunk) >= CHUNK:
                    if not self._put(chunk):
                        return
                    chunk = []
            if chunk and not self._put(chunk):
                return
            self._put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Iterator[T]:
        while True:
            got = self._queue.get()
            if got is _DONE:
                return
            if isinstance(got, BaseException):
                raise got
            yield from cast("list[T]", got)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
