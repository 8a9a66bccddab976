"""Noticing a dead server at once (decision 0039).

Kafka's group notices a member that died only at its session timeout (10 s by
default), and for that long nobody serves its partitions. But a process that dies is
noticed by the kernel at once: every socket it held is closed. So each server listens on
a liveness port (`LivenessListener`, advertised in its group membership as
`live=<token>@<host>:<port>`), and every other server holds one idle connection to it
(`LivenessWatch`). When that connection closes, the watcher connects again: a refusal
means nothing listens there any more, the process is gone, and the watcher removes its
member from the owners' group (Log.remove_member): the group rebalances now.

Why this is safe: the listener closes only when the process exits or, on a graceful
stop, after the server has left the group (server.py), so a server still owning
partitions never refuses. A frozen process (SIGSTOP, a long pause) still has its
listening socket, whose kernel keeps accepting: it is never taken for dead here; the
session timeout and the owner's lease (lease.py) deal with it. A peer that cannot be
reached (a network cut, a machine gone) gives timeouts, not refusals: also left to the
session timeout. Only a server whose connection was established and greeted with the
advertised token is ever removed, so an advertised address that reaches something else
removes nobody.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pinledger.ledger.log import GroupMember, LogError
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

_ITEM = "live="
_GREETING = b"pinledger-live "
# A peer's listener holds at most this many connections (one per other server).
MAX_HELD = 256
# How long a connect or a greeting may take before the peer counts as unreachable now
# (not dead: only a refusal means that).
CONNECT_TIMEOUT_S = 0.25
# How often an unreachable or not yet greeted peer is tried again.
RETRY_EVERY_S = 1.0
# How long the watch waits for a held connection to close before looking at the
# members again.
WATCH_TICK_S = 0.1
# How long a peer whose connection ended is tried for a refusal before it counts as
# alive: a process being killed closes its sockets one by one, and a connect can reach
# its listening socket just before that closes too.
SUSPECT_FOR_S = 1.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a server's liveness listener is, and the token it greets with."""

    token: str
    host: str
    port: int


def new_token() -> str:
    return secrets.token_hex(8)


def advertisement(endpoint: Endpoint) -> str:
    """The item a server adds to its group membership's advertisement (after the
    ledger formats, ledger/formats.py: a reader of formats skips items that are not
    numbers, so releases before this one read the formats as before)."""
    return f",{_ITEM}{endpoint.token}@{endpoint.host}:{endpoint.port}"


def advertised_endpoint(advertised: str) -> Endpoint | None:
    """A member's liveness endpoint from its advertisement; None for a member that
    advertises none (liveness off, or an older release)."""
    for item in advertised.split(","):
        if not item.startswith(_ITEM):
            continue
        token, at, address = item.removeprefix(_ITEM).partition("@")
        host, colon, port = address.rpartition(":")
        if at and colon and host and token and port.isdigit() and 0 < int(port) < 65536:
            return Endpoint(token, host.strip("[]"), int(port))
    return None


class LivenessListener:
    """A server's liveness port: greets each connection with its token and holds it
    until the process exits or `close` (after the server left the group)."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.token = token
        self._socket = socket.create_server((host, port), family=_family(host), backlog=64)
        self.port = int(self._socket.getsockname()[1])
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="liveness", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop listening, then close the held connections (in that order: a watcher
        that sees its connection close finds the port refusing)."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        else:  # never started: what its loop would close
            for closable in (self._socket, self._selector, self._wake_r, self._wake_w):
                closable.close()

    def _serve(self) -> None:
        held: set[socket.socket] = set()
        self._socket.setblocking(False)
        self._selector.register(self._socket, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                try:
                    ready = self._selector.select()
                except OSError as exc:  # never expected; keep the port alive regardless
                    log.warning("liveness port: %s", exc)
                    continue
                for key, _ in ready:
                    sock = key.fileobj
                    if sock is self._socket:
                        self._accept(held)
                    elif sock is not self._wake_r:
                        assert isinstance(sock, socket.socket)
                        self._read(sock, held)
        finally:
            self._socket.close()
            for sock in held:
                _close(sock)
            self._selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _accept(self, held: set[socket.socket]) -> None:
        try:
            sock, _ = self._socket.accept()
        except OSError:
            return
        if len(held) >= MAX_HELD:
            _close(sock)
            return
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.sendall(_GREETING + self.token.encode("ascii") + b"\n")
            sock.setblocking(False)
        except OSError:
            _close(sock)
            return
        held.add(sock)
        self._selector.register(sock, selectors.EVENT_READ)

    def _read(self, sock: socket.socket, held: set[socket.socket]) -> None:
        try:
            data = sock.recv(64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the watcher went away
            self._selector.unregister(sock)
            held.discard(sock)
            _close(sock)


@dataclass
class _Held:
    """A connection to a peer's liveness port. `greeting` is what it has sent so far;
    it counts as the peer's (its closing means something) once that is the whole
    greeting with the advertised token. The greeting is read as it comes, never waited
    for: a busy peer may take a while to accept."""

    sock: socket.socket
    expected: bytes
    greeting: bytes = b""

    @property
    def greeted(self) -> bool:
        return self.greeting == self.expected


class LivenessWatch:
    """Holds a connection to every other member's liveness port and removes from the
    owners' group each member whose port closes and then refuses connections."""

    def __init__(
        self,
        own_token: str,
        members: Callable[[], Sequence[GroupMember]],
        remove: Callable[[GroupMember], bool],
        on_removed: Callable[[], None],
        metrics: Metrics,
        stop: threading.Event,
    ) -> None:
        """`members`: the owners' group as last listed (Peers.members); `remove`:
        Log.remove_member for the owners' group; `on_removed`: told after a member
        was found gone (the owner rejoins at once rather than at its next heartbeat)."""
        self._own = own_token
        self._members = members
        self._remove = remove
        self._on_removed = on_removed
        self._metrics = metrics
        self._stop = stop
        self._held: dict[str, _Held] = {}
        self._tried: dict[str, float] = {}
        # Members found gone and not removed yet (retried while listed), and the tokens
        # of those dealt with (kept while the members list, refreshed every 2 s, still
        # names them).
        self._gone: dict[str, GroupMember] = {}
        self._done: set[str] = set()
        # Peers whose greeted connection ended, until when they are tried for a refusal.
        self._suspects: dict[str, float] = {}
        self.thread = threading.Thread(target=self._run, name="liveness-watch", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a bug here must not end the watch
                log.exception("liveness watch: unexpected error; going on")
                self._stop.wait(1.0)
        self.close()

    def close(self) -> None:
        """Let go of the held connections (the thread does on stop)."""
        for held in self._held.values():
            _close(held.sock)
        self._held.clear()

    def watching(self) -> list[str]:
        """The tokens of the peers whose greeting came: those whose death it would see."""
        return sorted(token for token, held in self._held.items() if held.greeted)

    def tick(self) -> None:
        """One look: connect to new members, wait up to WATCH_TICK_S for news on a held
        connection (a greeting, or its end), find out whether a member whose connection
        ended is gone, remove it."""
        listed = {
            endpoint.token: (member, endpoint)
            for member in self._members()
            if (endpoint := advertised_endpoint(member.advertised)) is not None
            and endpoint.token != self._own
        }
        self._forget_unlisted(listed.keys())
        self._connect_new(listed)
        for token in _ended_among(self._held, WATCH_TICK_S):
            held = self._held.pop(token)
            _close(held.sock)
            if held.greeted:
                self._suspects[token] = time.monotonic() + SUSPECT_FOR_S
            # Never greeted (not the advertised peer's port, or it went first): tried
            # again after RETRY_EVERY_S, and never taken for dead.
        self._judge_suspects(listed)
        for token, member in list(self._gone.items()):
            self._remove_gone(token, member)

    def _forget_unlisted(self, listed: Collection[str]) -> None:
        for token in [t for t in self._held if t not in listed]:
            _close(self._held.pop(token).sock)
        for state in (self._gone, self._suspects, self._tried):
            for token in [t for t in state if t not in listed]:
                del state[token]
        self._done &= set(listed)

    def _connect_new(self, listed: dict[str, tuple[GroupMember, Endpoint]]) -> None:
        busy = self._held.keys() | self._gone.keys() | self._done | self._suspects.keys()
        for token, (_, endpoint) in listed.items():
            if token in busy:
                continue
            if time.monotonic() - self._tried.get(token, float("-inf")) < RETRY_EVERY_S:
                continue
            self._tried[token] = time.monotonic()
            sock = _connected(endpoint)
            if sock is not None:
                self._held[token] = _Held(sock, _greeting(endpoint.token))

    def _judge_suspects(self, listed: dict[str, tuple[GroupMember, Endpoint]]) -> None:
        for token, until in list(self._suspects.items()):
            member, endpoint = listed[token]
            if _refused(endpoint):
                del self._suspects[token]
                self._gone[token] = member
            elif time.monotonic() >= until:
                # Its port still takes connections: alive, its connection closed for
                # another reason (its listener full, a network blip). Watched again.
                del self._suspects[token]
                self._tried.pop(token, None)

    def _remove_gone(self, token: str, member: GroupMember) -> None:
        try:
            removed = self._remove(member)
        except LogError as exc:
            log.warning(
                "server %s is gone but could not be removed from the owners' group (%s): "
                "trying again; its partitions move at its session timeout otherwise",
                member.member_id,
                exc,
            )
            return
        del self._gone[token]
        self._done.add(token)
        if removed:
            self._metrics.count(catalogue.PEERS_REMOVED_TOTAL)
            log.warning(
                "server %s is gone (its liveness port refuses connections): removed it "
                "from the owners' group so that its partitions move now",
                member.member_id,
            )
        self._on_removed()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _greeting(token: str) -> bytes:
    return _GREETING + token.encode("ascii") + b"\n"


def _connected(endpoint: Endpoint) -> socket.socket | None:
    """A connection to the endpoint (not yet greeted), or None."""
    try:
        sock = socket.create_connection((endpoint.host, endpoint.port), CONNECT_TIMEOUT_S)
    except OSError:
        return None
    sock.setblocking(False)
    return sock


def _ended_among(held: dict[str, _Held], timeout_s: float) -> list[str]:
    """Read what the held connections have to say, waiting up to `timeout_s` for some:
    greetings are collected; the tokens whose connection ended (or sent more than a
    greeting, or the wrong one) are returned."""
    if not held:
        threading.Event().wait(timeout_s)
        return []
    with selectors.DefaultSelector() as selector:
        for token, h in held.items():
            selector.register(h.sock, selectors.EVENT_READ, token)
        ready = selector.select(timeout_s)
    ended = []
    for key, _ in ready:
        token = str(key.data)
        h = held[token]
        try:
            data = h.sock.recv(64)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        h.greeting += data
        if not data or not h.expected.startswith(h.greeting):
            ended.append(token)
    return ended


def _refused(endpoint: Endpoint) -> bool:
    """Whether nothing listens at the endpoint any more: a refusal, not a timeout."""
    try:
        sock = socket.create_connection((endpoint.host, endpoint.port), CONNECT_TIMEOUT_S)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    _close(sock)
    return False


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
