"""service/api/framing.py: the framed transport reads one frame per call and nothing
more, so a call that runs past its frame fails at once (it used to wait for the bytes
of a next frame that never came), and calls sent back to back are read apart."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from thriftpy2.protocol.cybin.cybin import read_val
from thriftpy2.thrift import TType
from thriftpy2.transport import TCyFramedTransport, TTransportException

from pinledger.service.api.framing import FrameRefused, Frames


class Socket:
    """What the server's socket gives: `chunks`, one per read; then the client is gone
    (a read of a client that sent nothing more would wait: here it fails the test)."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)

    def read(self, size: int) -> bytes:
        if not self.chunks:
            raise AssertionError("read past what the client sent")
        chunk = self.chunks.pop(0)
        if len(chunk) > size:
            self.chunks.insert(0, chunk[size:])
            chunk = chunk[:size]
        return chunk


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _reader(sock: Socket) -> tuple[Frames, Any]:
    frames = Frames(sock, max_frame=1024)
    return frames, TCyFramedTransport(frames)


def test_calls_sent_back_to_back_are_read_apart() -> None:
    first, second = struct.pack(">i", 3) + b"abc", struct.pack(">i", 7)
    frames, transport = _reader(Socket(_frame(first) + _frame(second)))
    frames.next()
    assert read_val(transport, TType.STRING) == "abc"
    frames.next()
    transport.clean()
    assert read_val(transport, TType.I32) == 7


def test_a_call_running_past_its_frame_fails_at_once_and_the_next_frame_reads_clean() -> None:
    # A string announcing 100 bytes in a frame of 9: thriftpy2's framed transport would
    # read on into the next frame, and wait for it.
    short = _frame(struct.pack(">i", 100) + b"hello")
    frames, transport = _reader(Socket(short, _frame(struct.pack(">i", 3) + b"abc")))
    frames.next()
    with pytest.raises(TTransportException):
        read_val(transport, TType.STRING)
    assert frames.payload == struct.pack(">i", 100) + b"hello"
    frames.next()
    transport.clean()
    assert read_val(transport, TType.STRING) == "abc"


@pytest.mark.parametrize("size", [0, -5, 1025])
def test_a_header_over_the_limit_is_refused_before_anything_is_read(size: int) -> None:
    frames, _ = _reader(Socket(struct.pack(">i", size) + b"GET /"))
    with pytest.raises(FrameRefused) as refused:
        frames.next()
    assert (refused.value.size, refused.value.head) == (size, b"GET /")


def test_a_frame_arriving_in_pieces_is_read_whole() -> None:
    payload = struct.pack(">i", 5) + b"hello"
    data = _frame(payload)
    frames, transport = _reader(Socket(*(data[i : i + 3] for i in range(0, len(data), 3))))
    frames.next()
    assert read_val(transport, TType.STRING) == "hello"
