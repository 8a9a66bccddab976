"""Frames under the framed transport, one call at a time (connections.py).

`Frames.next()` reads the next whole frame from the socket; thriftpy2's framed
transport then reads that frame, and nothing more: a call whose arguments run past the
end of its frame (a string or list longer than what is left, a struct without its
end) fails at once with END_OF_FILE, and is answered as malformed, instead of reading
on into the next frame and waiting for bytes that never come. A frame header
announcing more than the limit (or a non-positive size) is refused before any buffer
is allocated for it (FrameRefused; connections.py answers or closes). Garbage on the
socket costs its sender the connection, nobody else anything; thriftpy2's own framed
transport would malloc whatever size it is told.
"""

from __future__ import annotations

import struct
from typing import Any

from thriftpy2.transport import TTransportException

# The largest enqueue we accept is bounded by the body limit times jobs per request;
# 64 MiB leaves room for big batches and still stops a garbage header early.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# Bytes asked of the socket at once: at least a whole small call, and what follows it
# when the client sends its next call before the answer (kept for the next frame); at
# most a megabyte (a recv allocates what it is asked for).
_CHUNK = 64 * 1024
_MAX_CHUNK = 1024 * 1024
_HEADER = struct.Struct(">i")


class FrameRefused(TTransportException):
    """A frame header announced `size` bytes, over the limit (or not positive).
    `head` holds the bytes of the frame already read past its header."""

    def __init__(self, size: int, limit: int, head: bytes) -> None:
        super().__init__(
            TTransportException.UNKNOWN,
            f"frame of {size} bytes refused (limit {limit}): not a framed Thrift client, "
            "or a corrupt stream",
        )
        self.size = size
        self.limit = limit
        self.head = head


class Frames:
    """Wraps the accepted socket: reads it a frame at a time, and hands the framed
    transport above the current frame only (header included: it reads that too)."""

    def __init__(self, inner: Any, max_frame: int = MAX_FRAME_BYTES) -> None:
        self._inner = inner
        self._max = max_frame
        # Read from the socket: the current frame (up to _end), then whatever came after
        # it (the client's next call, sent before the answer).
        self._pending = bytearray()
        self._at = 0
        self._end = 0

    def next(self) -> None:
        """Wait for the next frame and make it the current one. TimeoutError when the
        socket's timeout passes first, TTransportException when the client closes,
        FrameRefused for a header over the limit."""
        pending = self._pending
        del pending[: self._end]  # the frame before
        self._at = self._end = 0
        if len(pending) < 4:
            self._fill(4)
        (size,) = _HEADER.unpack_from(pending)
        if not 0 < size <= self._max:
            raise FrameRefused(size, self._max, bytes(pending[4:]))
        if len(pending) < 4 + size:
            self._fill(4 + size)
        self._end = 4 + size

    @property
    def payload(self) -> bytes:
        """The current frame without its header."""
        return bytes(self._pending[4 : self._end])

    def _fill(self, size: int) -> None:
        while len(self._pending) < size:
            wanted = size - len(self._pending)
            self._pending += self._inner.read(min(max(wanted, _CHUNK), _MAX_CHUNK))

    def read(self, size: int) -> bytes:
        """The current frame's next `size` bytes at most; nothing once it is read whole
        (the framed transport then raises END_OF_FILE)."""
        at = self._at
        stop = min(at + size, self._end)
        self._at = stop
        return bytes(self._pending[at:stop])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
