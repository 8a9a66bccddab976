"""Which servers to talk to: a fixed list, or a server-list file re-read when it changes.

The file format is PinLater's: one `host:port` per line; blank lines and lines starting
with `#` are ignored. A file that becomes unreadable or empty keeps the last good list,
so a half-written file never leaves the client with no servers.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pinledger.client.errors import ServerListError
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

DEFAULT_PORT = 9010


@dataclass(frozen=True, slots=True, order=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(text: str, where: str = "") -> Address:
    """`host:port`, `host` (port 9010) or `[v6]:port`."""
    text = text.strip()
    if not text:
        raise ServerListError(f"{where}empty server address")
    host, sep, port_text = text.rpartition(":")
    if not sep or (host.count(":") and not host.startswith("[")):
        host, port_text = text, str(DEFAULT_PORT)
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ServerListError(f"{where}bad port in {text!r}: expected host:port") from None
    if not host or not 0 < port < 65536:
        raise ServerListError(f"{where}bad server address {text!r}: expected host:port")
    return Address(host, port)


def parse_server_list(text: str, source: str = "server list") -> list[Address]:
    addresses = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if entry:
            addresses.append(parse_address(entry, f"{source} line {number}: "))
    return addresses


class ServerList:
    """The current servers, in a rotating order so load spreads across them.

    `ServerList(["h1:9010", "h2:9010"])` is fixed; `ServerList.from_file(path)` re-reads
    the file (at most every `check_interval_s`, on `clock`) when its modification
    time or size changes.
    """

    def __init__(
        self,
        addresses: Sequence[str | Address],
        path: Path | None = None,
        check_interval_s: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        parsed = [a if isinstance(a, Address) else parse_address(a) for a in addresses]
        if not parsed and path is None:
            raise ServerListError("no servers given")
        self._addresses = parsed
        self._path = path
        self._check_interval_s = check_interval_s
        self._clock = clock
        self._stamp: tuple[float, int] | None = None
        self._checked_at = 0.0
        self._next = 0
        self._lock = threading.Lock()
        if path is not None:
            self._reload(force=True)

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        check_interval_s: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> ServerList:
        return cls([], Path(path), check_interval_s, clock)

    @classmethod
    def of(cls, servers: ServerList | str | Sequence[str | Address]) -> ServerList:
        """A list from what a caller may pass: a ServerList, a `host:port`, a sequence of
        them, or the path of a server-list file (a string naming an existing file)."""
        if isinstance(servers, ServerList):
            return servers
        if isinstance(servers, str):
            if os.path.isfile(servers):
                return cls.from_file(servers)
            return cls([servers])
        return cls(servers)

    def _reload(self, force: bool = False) -> None:
        assert self._path is not None
        try:
            stat = self._path.stat()
            stamp = (stat.st_mtime, stat.st_size)
            if not force and stamp == self._stamp:
                return
            addresses = parse_server_list(self._path.read_text(), str(self._path))
        except (OSError, ServerListError) as exc:
            if force and not self._addresses:
                raise ServerListError(f"cannot use server list {self._path}: {exc}") from exc
            log.warning("server list %s unusable, keeping the previous one: %s", self._path, exc)
            return
        if not addresses:
            if force and not self._addresses:
                raise ServerListError(f"server list {self._path} names no servers")
            log.warning("server list %s is empty, keeping the previous one", self._path)
            return
        if addresses != self._addresses:
            log.info("servers: %s", ", ".join(map(str, addresses)))
        self._addresses = addresses
        self._stamp = stamp

    def current(self) -> list[Address]:
        """All servers, starting with the next one in rotation."""
        with self._lock:
            if self._path is not None:
                now = self._clock.monotonic()
                if now - self._checked_at >= self._check_interval_s:
                    self._checked_at = now
                    self._reload()
            addresses = self._addresses
            start = self._next % len(addresses)
            self._next += 1
        return addresses[start:] + addresses[:start]
