"""The liveness watch (service/ownership/liveness.py) on real sockets: a server whose
listener closes and then refuses connections is removed from the owners' group, once;
one that still accepts (frozen, or its connection dropped for another reason), one that
greets with another token, or one that advertises nothing, never is."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinledger.ledger import formats
from pinledger.ledger.log import GroupMember, LogError
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics
from pinledger.service.ownership.liveness import (
    Endpoint,
    LivenessListener,
    LivenessWatch,
    advertised_endpoint,
    advertisement,
    new_token,
)

HOST = "127.0.0.1"


def member_of(listener: LivenessListener, name: str = "pinledger@b:1") -> GroupMember:
    ad = formats.advertisement() + advertisement(Endpoint(listener.token, HOST, listener.port))
    return GroupMember(name, [], ad, group_member_id=f"{name}-uuid")


WATCHERS: list[Watcher] = []


@pytest.fixture(autouse=True)
def _close_watchers() -> Iterator[None]:
    yield
    while WATCHERS:
        WATCHERS.pop().watch.close()


class Watcher:
    def __init__(self, members: list[GroupMember], fail_removals: int = 0) -> None:
        WATCHERS.append(self)
        self.members = members
        self.removed: list[GroupMember] = []
        self.told = 0
        self.fail_removals = fail_removals
        self.metrics = Metrics()
        self.watch = LivenessWatch(
            new_token(),
            lambda: self.members,
            self.remove,
            self.rejoin,
            self.metrics,
            threading.Event(),
        )

    def remove(self, member: GroupMember) -> bool:
        if self.fail_removals:
            self.fail_removals -= 1
            raise LogError("the coordinator is unavailable")
        self.removed.append(member)
        return True

    def rejoin(self) -> None:
        self.told += 1

    def ticks(self, until: Callable[[], bool], within_s: float = 3.0) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            self.watch.tick()
            if until():
                return True
        return False


def test_a_server_whose_process_is_gone_is_removed_once_and_the_owner_rejoins() -> None:
    listener = LivenessListener(HOST, 0, new_token())
    listener.start()
    member = member_of(listener)
    w = Watcher([member])
    assert w.ticks(lambda: bool(w.watch.watching())), "never greeted"
    listener.close()  # what the kernel does when the process dies
    assert w.ticks(lambda: bool(w.removed)), "the dead server was not removed"
    assert w.removed == [member]
    assert w.told == 1
    for _ in range(5):  # still listed until the members list is read again
        w.watch.tick()
    assert w.removed == [member], "removed again"
    assert w.told == 1
    assert w.metrics.snapshot_counter(catalogue.PEERS_REMOVED_TOTAL) == 1


def test_a_frozen_server_still_accepts_and_is_never_removed() -> None:
    listener = LivenessListener(HOST, 0, new_token())
    listener.start()
    w = Watcher([member_of(listener)])
    assert w.ticks(lambda: bool(w.watch.watching()))
    frozen = LivenessListener(HOST, 0, new_token())
    # Never started: nothing runs its accept loop, as in a stopped process, but the
    # kernel still completes connections to its listening socket; the one that was
    # greeted stays open.
    w.members.append(member_of(frozen, "pinledger@c:1"))
    assert not w.ticks(lambda: bool(w.removed), within_s=1.5)
    listener.close()
    frozen.close()


def test_a_connection_dropped_while_the_port_still_accepts_removes_nobody() -> None:
    """The connection ends (the peer's listener was full, a network blip) but the port
    still takes connections: the process is alive."""
    token = new_token()
    server = socket.create_server((HOST, 0))
    port = server.getsockname()[1]

    def greet_and_hang_up() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            conn.sendall(b"pinledger-live " + token.encode() + b"\n")
            conn.close()

    threading.Thread(target=greet_and_hang_up, daemon=True).start()
    member = GroupMember("pinledger@b:1", [], advertisement(Endpoint(token, HOST, port)), "b")
    w = Watcher([member])
    assert not w.ticks(lambda: bool(w.removed), within_s=1.5)
    assert w.told == 0
    server.close()


def test_a_port_that_greets_with_another_token_is_not_watched() -> None:
    listener = LivenessListener(HOST, 0, new_token())
    listener.start()
    wrong = Endpoint(new_token(), HOST, listener.port)
    member = GroupMember("pinledger@b:1", [], advertisement(wrong), group_member_id="b")
    w = Watcher([member])
    for _ in range(5):
        w.watch.tick()
    assert not w.watch.watching()
    listener.close()
    assert not w.ticks(lambda: bool(w.removed), within_s=1.0)


def test_a_member_without_a_liveness_endpoint_is_left_to_the_session_timeout() -> None:
    w = Watcher([GroupMember("pinledger@old:1", [], formats.advertisement(), "old")])
    assert not w.ticks(lambda: bool(w.removed), within_s=0.5)
    assert not w.watch.watching()


def test_a_removal_that_fails_is_tried_again() -> None:
    listener = LivenessListener(HOST, 0, new_token())
    listener.start()
    member = member_of(listener)
    w = Watcher([member], fail_removals=2)
    assert w.ticks(lambda: bool(w.watch.watching()))
    listener.close()
    assert w.ticks(lambda: bool(w.removed))
    assert w.removed == [member] and w.told == 1


def test_the_listener_closes_its_port_before_its_connections() -> None:
    """A watcher that sees its connection close must find the port refusing."""
    listener = LivenessListener(HOST, 0, new_token())
    listener.start()
    sock = socket.create_connection((HOST, listener.port))
    assert sock.recv(64).startswith(b"pinledger-live ")
    listener.close()
    assert sock.recv(64) == b""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((HOST, listener.port), 1).close()
    sock.close()


@given(
    token=st.text("0123456789abcdef", min_size=1, max_size=16),
    host=st.sampled_from(["10.0.0.5", "pinledger-0.pinledger", "::1", "h"]),
    port=st.integers(1, 65535),
)
def test_an_advertised_endpoint_reads_back_and_the_formats_read_as_before(
    token: str, host: str, port: int
) -> None:
    text = formats.advertisement() + advertisement(Endpoint(token, host, port))
    assert advertised_endpoint(text) == Endpoint(token, host, port)
    # A release before liveness reads the formats from the same text.
    assert formats.advertised_reads(text) == formats.READS


@pytest.mark.parametrize(
    "text",
    ["", "formats=1,2", "live=", "live=abc", "live=abc@h", "live=@h:1", "live=t@h:0", "live=t@h:x"],
)
def test_an_advertisement_without_a_usable_endpoint_has_none(text: str) -> None:
    assert advertised_endpoint(text) is None


def test_a_busy_server_that_greets_late_is_watched_all_the_same() -> None:
    """Under load a server's listener may take a while to accept and greet: the
    greeting is read as it comes (a watcher that waited a fixed time for it missed a
    death on a loaded machine)."""
    token = new_token()
    server = socket.create_server((HOST, 0))
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []

    def greet_late() -> None:
        conn, _ = server.accept()
        time.sleep(0.6)
        conn.sendall(b"pinledger-live " + token.encode() + b"\n")
        accepted.append(conn)

    threading.Thread(target=greet_late, daemon=True).start()
    member = GroupMember("pinledger@b:1", [], advertisement(Endpoint(token, HOST, port)), "b")
    w = Watcher([member])
    assert w.ticks(lambda: bool(w.watch.watching()), within_s=3.0)
    server.close()  # the process dies: its listening socket, then its connections
    accepted[0].close()
    assert w.ticks(lambda: bool(w.removed))
    assert w.removed == [member]


def test_a_dying_server_whose_port_still_answers_a_moment_is_removed_all_the_same() -> None:
    """A process being killed closes its sockets one by one: the watcher's connection
    can end while the listening socket still completes a connect for a moment (seen
    under load: the check found it open, and the death waited for the session
    timeout)."""
    token = new_token()
    server = socket.create_server((HOST, 0))
    port = server.getsockname()[1]
    held: list[socket.socket] = []

    def serve() -> None:
        conn, _ = server.accept()
        conn.sendall(b"pinledger-live " + token.encode() + b"\n")
        held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    member = GroupMember("pinledger@b:1", [], advertisement(Endpoint(token, HOST, port)), "b")
    w = Watcher([member])
    assert w.ticks(lambda: bool(w.watch.watching()))
    held[0].close()  # the watcher's connection ends first ...
    w.watch.tick()  # ... and its check finds the port still taking connections
    assert not w.removed
    server.close()  # then the listening socket goes
    assert w.ticks(lambda: bool(w.removed))
    assert w.removed == [member]
