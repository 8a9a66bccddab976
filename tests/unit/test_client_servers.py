"""Server addresses and server-list files, as the client reads them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinledger.client.errors import ServerListError
from pinledger.client.servers import Address, ServerList, parse_address, parse_server_list


def test_addresses_parse_with_default_port_and_ipv6() -> None:
    assert parse_address("h1:9011") == Address("h1", 9011)
    assert parse_address(" h2 ") == Address("h2", 9010)
    assert parse_address("[::1]:9012") == Address("::1", 9012)
    assert parse_address("::1") == Address("::1", 9010)


@pytest.mark.parametrize("text", ["h:port", "h:0", "h:70000", ":9010", ""])
def test_bad_addresses_say_what_is_wrong(text: str) -> None:
    with pytest.raises(ServerListError, match=r"address|port"):
        parse_address(text)


def test_server_list_skips_blanks_and_comments_and_names_bad_lines() -> None:
    text = "# servers\nh1:1\n\n  h2:2  # second\n"
    assert parse_server_list(text) == [Address("h1", 1), Address("h2", 2)]
    with pytest.raises(ServerListError, match=r"servers\.txt line 2"):
        parse_server_list("h1:1\nh2:x\n", "servers.txt")


def test_rotation_spreads_calls_over_every_server() -> None:
    servers = ServerList(["a:1", "b:2", "c:3"])
    firsts = [servers.current()[0].host for _ in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]
    assert sorted(a.host for a in servers.current()) == ["a", "b", "c"]


def _rewrite(path: Path, text: str) -> None:
    path.write_text(text)
    # Make the change visible even within one mtime tick of the filesystem.
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_file_is_reread_when_it_changes_and_a_broken_file_keeps_the_last_good_list(
    tmp_path: Path,
) -> None:
    path = tmp_path / "servers"
    path.write_text("h1:1\n")
    servers = ServerList.from_file(path, check_interval_s=0)
    assert servers.current() == [Address("h1", 1)]

    _rewrite(path, "h2:2\nh3:3\n")
    assert sorted(servers.current()) == [Address("h2", 2), Address("h3", 3)]

    _rewrite(path, "h4:nope\n")
    assert sorted(servers.current()) == [Address("h2", 2), Address("h3", 3)]
    _rewrite(path, "")
    assert sorted(servers.current()) == [Address("h2", 2), Address("h3", 3)]
    path.unlink()
    assert sorted(servers.current()) == [Address("h2", 2), Address("h3", 3)]


def test_a_list_that_starts_unusable_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServerListError, match="no servers"):
        ServerList([])
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    with pytest.raises(ServerListError, match="names no servers"):
        ServerList.from_file(empty)
    with pytest.raises(ServerListError, match="cannot use server list"):
        ServerList.from_file(tmp_path / "missing")


def test_of_accepts_an_address_a_list_or_a_file(tmp_path: Path) -> None:
    path = tmp_path / "servers"
    path.write_text("h9:9\n")
    assert ServerList.of("h1:1").current() == [Address("h1", 1)]
    assert ServerList.of(["h1:1"]).current() == [Address("h1", 1)]
    assert ServerList.of(str(path)).current() == [Address("h9", 9)]
