"""A guard under the framed transport: a frame header announcing more than the limit
(or a non-positive size) is refused before any buffer is allocated for it
(FrameRefused; connections.py answers or closes). Garbage on the socket costs its
sender the connection, nobody else anything; thriftpy2's own framed transport would
malloc whatever size it is told.
"""

from __future__ import annotations

from typing import Any

from thriftpy2.transport import TTransportException

# The largest enqueue we accept is bounded by the body limit times jobs per request;
# 64 MiB leaves room for big batches and still stops a garbage header early.
MAX_FRAME_BYTES = 64 * 1024 * 1024


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


class FrameGuard:
    """Wraps the accepted socket and follows the frame boundaries in the byte stream."""

    def __init__(self, inner: Any, max_frame: int = MAX_FRAME_BYTES) -> None:
        self._inner = inner
        self._max = max_frame
        self._header = b""
        self._remaining = 0

    def read(self, size: int) -> bytes:
        data: bytes = self._inner.read(size)
        position = 0
        while position < len(data):
            if self._remaining:
                step = min(self._remaining, len(data) - position)
                self._remaining -= step
                position += step
                continue
            need = 4 - len(self._header)
            self._header += data[position : position + need]
            position += need
            if len(self._header) == 4:
                frame = int.from_bytes(self._header, "big", signed=True)
                self._header = b""
                if not 0 < frame <= self._max:
                    raise FrameRefused(frame, self._max, data[position:])
                self._remaining = frame
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
