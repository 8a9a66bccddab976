"""PinLater calls as bytes: a framed, strict binary-protocol encoder driven by the loaded
IDL's specs, able to send what thriftpy2's own client refuses to write (bytes that are
not UTF-8 in a string field, a field of the wrong type, a truncated struct), and a
socket client that reads each answer back as a result, a PinLaterException, a
TApplicationException, or a closed connection (the wire fuzzer, test_wire_fuzz.py)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.thrift import TApplicationException, TMessageType
from thriftpy2.transport import TCyMemoryBuffer

from pinledger.idl import pinlater

STOP, BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST = (
    0,
    2,
    3,
    4,
    6,
    8,
    10,
    11,
    12,
    13,
    14,
    15,
)
# thriftpy2's spec type of an IDL `binary`: a STRING on the wire.
BINARY = 18
_CALL = 0x80010000 | TMessageType.CALL
_PROTOCOLS = TCyBinaryProtocolFactory()


@dataclass(frozen=True, slots=True)
class Raw:
    """A value sent as given: its wire type and encoded bytes (a wrong type, say)."""

    ttype: int
    payload: bytes


def encode_struct(cls: Any, values: Mapping[str, Any]) -> bytes:
    """The struct `cls` (a loaded thriftpy2 struct) holding `values` by field name, in
    the order given; a field left out is not sent."""
    by_name = {spec[1]: (fid, spec) for fid, spec in cls.thrift_spec.items()}
    out = bytearray()
    for name, value in values.items():
        fid, spec = by_name[name]
        ttype, payload = encode_value(spec[0], spec_arg(spec), value)
        out += struct.pack(">bh", ttype, fid) + payload
    out.append(STOP)
    return bytes(out)


def spec_arg(spec: tuple[Any, ...]) -> Any:
    """What a field spec says of its type beyond the type id (a struct's class, a
    list's element), or None for a plain value."""
    return spec[2] if len(spec) == 4 else None


def encode_value(ttype: int, arg: Any, value: Any) -> tuple[int, bytes]:
    """(wire type, bytes) of one value of spec type `ttype`."""
    if isinstance(value, Raw):
        return value.ttype, value.payload
    if ttype in (STRING, BINARY):
        data = value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")
        return STRING, struct.pack(">i", len(data)) + data
    fixed = {BOOL: ">?", BYTE: ">b", I16: ">h", I32: ">i", I64: ">q", DOUBLE: ">d"}
    if ttype in fixed:
        return ttype, struct.pack(fixed[ttype], value)
    if ttype == STRUCT:
        return STRUCT, encode_struct(arg, value)
    if ttype in (LIST, SET):
        etype, earg = arg if isinstance(arg, tuple) else (arg, None)
        items = [encode_value(etype, earg, item) for item in value]
        head = struct.pack(">bi", STRING if etype == BINARY else etype, len(items))
        return ttype, head + b"".join(payload for _, payload in items)
    raise ValueError(f"no encoding for type {ttype}")


def call_frame(method: str, args: Mapping[str, Any], seqid: int) -> bytes:
    """A framed call of `method` with its arguments by name."""
    name = method.encode()
    args_type = getattr(pinlater.PinLater, f"{method}_args")
    body = struct.pack(">Ii", _CALL, len(name)) + name + struct.pack(">i", seqid)
    return frame(body + encode_struct(args_type, args))


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Answer(NamedTuple):
    """What came back: "result" (value), "error" (a PinLaterException: code and
    message), "application" (a TApplicationException: type and message) or "closed"."""

    kind: str
    value: Any = None
    code: int | None = None
    message: str = ""

    def __str__(self) -> str:
        if self.kind == "error":
            return f"PinLaterException {self.code}: {self.message[:300]}"
        if self.kind == "application":
            return f"TApplicationException {self.code}: {self.message[:300]}"
        return self.kind


class WireClient:
    """One connection; sends frames as bytes and reads answers back."""

    def __init__(self, port: int, timeout_s: float = 30.0) -> None:
        self.port = port
        self.timeout_s = timeout_s
        self._seqid = 0
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def reconnect(self) -> None:
        self.close()
        self.sock = self._connect()

    def close(self) -> None:
        self.sock.close()

    def call(self, method: str, args: Mapping[str, Any]) -> Answer:
        self._seqid += 1
        return self.send(call_frame(method, args, self._seqid), self._seqid)

    def send(self, data: bytes, seqid: int | None = None) -> Answer:
        """Send `data` (one or more frames) and read one answer."""
        try:
            self.sock.sendall(data)
            head = self._read(4)
            if head is None:
                return Answer("closed")
            payload = self._read(struct.unpack(">i", head)[0])
        except OSError as exc:
            return Answer("closed", message=str(exc))
        if payload is None:
            return Answer("closed")
        return _decode(payload, seqid)

    def _read(self, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(min(size - len(data), 1 << 20))
            if not chunk:
                return None
            data += chunk
        return bytes(data)


def _decode(payload: bytes, seqid: int | None) -> Answer:
    proto = _PROTOCOLS.get_protocol(TCyMemoryBuffer(payload))
    name, mtype, got = proto.read_message_begin()
    if seqid is not None and got != seqid:
        raise AssertionError(f"answer to call {got}, expected {seqid}")
    if mtype == TMessageType.EXCEPTION:
        app = TApplicationException()
        proto.read_struct(app)
        return Answer("application", code=app.type, message=app.message or "")
    result = getattr(pinlater.PinLater, f"{name}_result")()
    proto.read_struct(result)
    error = getattr(result, "e", None)
    if error is not None:
        return Answer("error", code=int(error.errorCode), message=error.message or "")
    return Answer("result", value=getattr(result, "success", None))
