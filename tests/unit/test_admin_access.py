"""Who gets in on the admin port (docs/security.md): /metrics and /stats.txt behind a
bearer token when one is configured, on a server's port and on the host's port of
`serve --processes` (which gives the token to its processes); failed dashboard logins
limited per address; the admin password's settings checked."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinledger.cli.main import main
from pinledger.dashboard.auth import (
    LOGIN_FAILURES,
    LOGIN_WINDOW_S,
    Sessions,
    TooManyLoginsError,
)
from pinledger.ledger.fake_clock import FakeClock
from pinledger.projections.fake.store import FakeStore
from pinledger.service.config import Config, ConfigError
from pinledger.service.observability.admin_http import AdminHttpServer
from pinledger.service.observability.metrics import Metrics
from pinledger.service.processes.admin import HostAdminServer
from pinledger.service.processes.merge import WorkerView
from pinledger.service.security.password import AdminPassword, hash_password_scrypt, parse_scrypt

TOKEN = "scrape-T0ken"


def _get(port: int, path: str, token: str | None = None) -> tuple[int, dict[str, str], str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, dict(e.headers), e.read().decode()


@pytest.fixture
def worker() -> Iterator[AdminHttpServer]:
    metrics = Metrics()
    metrics.count("pinledger_rpc_total", method="enqueueJobs")
    server = AdminHttpServer("127.0.0.1", 0, metrics, lambda: {"owner": "ok"}, metrics_token=TOKEN)
    server.start()
    yield server
    server.stop()


def test_metrics_need_the_token_when_one_is_set_and_health_stays_open(
    worker: AdminHttpServer,
) -> None:
    for path in ("/metrics", "/stats.txt"):
        for token in (None, "wrong", TOKEN.lower()):
            status, headers, body = _get(worker.port, path, token)
            assert status == 401, (path, token)
            assert headers["WWW-Authenticate"].startswith("Bearer")
            assert TOKEN not in body
        status, _, body = _get(worker.port, path, TOKEN)
        assert status == 200 and "pinledger_rpc_total" in body
    assert _get(worker.port, "/health")[0] == 200


def test_the_host_port_asks_for_the_token_and_gives_it_to_its_processes(
    worker: AdminHttpServer,
) -> None:
    def views() -> list[WorkerView]:
        return [WorkerView(0, 100, worker.port, 9100, 0)]

    host = HostAdminServer("127.0.0.1", 0, views, "127.0.0.1", metrics_token=TOKEN)
    host.start()
    try:
        assert _get(host.port, "/metrics")[0] == 401
        status, _, body = _get(host.port, "/metrics", TOKEN)
        assert status == 200
        assert 'pinledger_rpc_total{process="0",method="enqueueJobs"} 1' in body
    finally:
        host.stop()


def test_failed_logins_are_limited_per_address_and_the_limit_passes() -> None:
    clock = FakeClock()
    sessions = Sessions(AdminPassword(scrypt=hash_password_scrypt("s3cret")), clock, FakeStore())
    for _ in range(LOGIN_FAILURES):
        assert sessions.login("guess", client="10.0.0.9") is None
    with pytest.raises(TooManyLoginsError) as limited:
        sessions.login("s3cret", client="10.0.0.9")  # the right one too, meanwhile
    assert 0 < limited.value.wait_s <= LOGIN_WINDOW_S
    assert sessions.login("s3cret", client="10.0.0.7") is not None  # another address
    clock.advance(LOGIN_WINDOW_S)
    assert sessions.login("s3cret", client="10.0.0.9") is not None


def test_admin_password_settings_are_checked(tmp_path: Path) -> None:
    stored = hash_password_scrypt("pw")
    with pytest.raises(ConfigError, match="not both"):
        Config(admin_password_hash=stored, admin_password_sha256="ab").admin_password()
    with pytest.raises(ConfigError, match="pinledger hash-password") as bad:
        Config(admin_password_hash="scrypt$3$8$1$00$00").admin_password()
    assert "scrypt$3" not in str(bad.value)
    secret = tmp_path / "hash"
    secret.write_text(stored + "\n")
    config = Config.from_env({"PINLEDGER_ADMIN_PASSWORD_HASH_FILE": str(secret)})
    assert config.admin_password().check("pw")
    assert stored not in repr(config)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    assert Config.from_env({"PINLEDGER_METRICS_TOKEN_FILE": str(token)}).metrics_token == TOKEN


def test_hash_password_prints_a_quoted_scrypt_setting_or_pinlaters_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["hash-password", "--password", "pw"]) == 0
    line = capsys.readouterr().out.strip()
    name, _, quoted = line.partition("=")
    assert name == "PINLEDGER_ADMIN_PASSWORD_HASH"
    assert quoted.startswith("'scrypt$") and quoted.endswith("'")
    parse_scrypt(quoted.strip("'"))
    assert AdminPassword(scrypt=quoted.strip("'")).check("pw")
    assert main(["hash-password", "--password", "pw", "--pinlater", "--salt", "s"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "PINLEDGER_ADMIN_SALT=s"
    assert main(["hash-password", "--password", "pw", "--salt", "s"]) == 2
    assert "--salt goes with --pinlater" in capsys.readouterr().err
