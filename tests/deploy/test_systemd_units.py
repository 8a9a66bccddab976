"""The systemd units (deploy/systemd): `systemd-analyze verify` finds nothing to say
about them, as installed on a host (the commands at the paths they name, the drop-in
beside them), `systemd-analyze security` rates them confined, the stop timeout covers
the server's hand-back, and the example environment file is one the server takes.
The systemd-analyze checks skip where the command is absent (stack/install.sh
installs it)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinledger.service.config import Config
from pinledger.service.server import EXIT_UNREADABLE_FORMAT

pytestmark = pytest.mark.deploy

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
SERVER = "pinledger.service"
MIGRATE = "pinledger-migrate.service"
DROP_IN = "credentials.conf"
# Owner.stop joins its threads with these timeouts (service/ownership/owner.py).
# systemd-analyze security's scale: 0 (confined) to 10 (exposed); "OK" up to 3.9.
MOST_EXPOSURE = 2.0
SYSTEM_UNITS = Path("/usr/lib/systemd/system")


def directives(unit: Path) -> dict[str, list[str]]:
    """Each `Key=value` of a unit file, under "Section.Key", in order (a key may repeat)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in unit.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key}", []).append(value)
    return found


def environment_file() -> dict[str, str]:
    """deploy/systemd/pinledger.env's settings, as systemd reads them."""
    settings: dict[str, str] = {}
    for line in (UNITS / "pinledger.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            settings[name] = value
    return settings


def analyze() -> str:
    command = shutil.which("systemd-analyze")
    if command is None:
        pytest.skip("no systemd-analyze here (Debian's systemd package: bash stack/install.sh)")
    return command


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Path]:
    """A root holding the units as deploy/README.md installs them, the system's own
    units they refer to (targets), and a stand-in for the command at the path they run."""
    if not SYSTEM_UNITS.is_dir():
        pytest.skip(f"no {SYSTEM_UNITS} here: systemd is not installed")
    root = tmp_path / "root"
    shutil.copytree(SYSTEM_UNITS, root / SYSTEM_UNITS.relative_to("/"), symlinks=True)
    installed = root / "etc" / "systemd" / "system"
    (installed / f"{SERVER}.d").mkdir(parents=True)
    for unit in (SERVER, MIGRATE):
        shutil.copy(UNITS / unit, installed / unit)
    shutil.copy(UNITS / DROP_IN, installed / f"{SERVER}.d" / DROP_IN)
    (root / "etc" / "pinledger").mkdir()
    shutil.copy(UNITS / "pinledger.env", root / "etc" / "pinledger" / "pinledger.env")
    for unit in (SERVER, MIGRATE):
        for start in directives(UNITS / unit)["Service.ExecStart"]:
            command = root / start.split()[0].lstrip("/")
            command.parent.mkdir(parents=True, exist_ok=True)
            command.write_text("#!/bin/sh\n")
            command.chmod(0o755)
    yield root


def test_systemd_analyze_verify_finds_nothing(host: Path) -> None:
    done = subprocess.run(
        [analyze(), "verify", f"--root={host}", SERVER, MIGRATE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Unknown keys and values it cannot parse are warnings: exit 0 but a line each.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize("unit", [SERVER, MIGRATE])
def test_the_units_are_confined(host: Path, unit: str) -> None:
    done = subprocess.run(
        [analyze(), "security", "--offline=yes", f"--root={host}", unit],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if "Overall exposure level" in line]
    assert lines, done.stdout + done.stderr
    exposure = float(lines[-1].split(":")[1].split()[0])
    assert exposure <= MOST_EXPOSURE, done.stdout


def test_the_server_needs_the_migration_first() -> None:
    server = directives(UNITS / SERVER)
    assert MIGRATE in server["Unit.Requires"]
    assert MIGRATE in server["Unit.After"][0].split()
    migrate = directives(UNITS / MIGRATE)
    assert migrate["Service.Type"] == ["oneshot"]
    # Not RemainAfterExit: every start of the server migrates again (a new release).
    assert "Service.RemainAfterExit" not in migrate
    assert [s.split()[1:] for s in migrate["Service.ExecStart"]] == [["migrate"]]
    assert [s.split()[1:] for s in server["Service.ExecStart"]] == [["serve"]]


def test_the_stop_timeout_covers_the_hand_back() -> None:
    server = directives(UNITS / SERVER)
    assert server["Service.KillSignal"] == ["SIGTERM"]
    assert server["Service.KillMode"] == ["mixed"]
    timeout = float(environment_file()["PINLEDGER_APPEND_TIMEOUT_S"])
    config = Config(append_timeout_s=timeout)
    longest = config.stop_s
    (stop,) = server["Service.TimeoutStopSec"]
    assert longest <= float(stop) <= longest + 60


def test_a_failing_server_is_restarted_unless_only_an_upgrade_helps() -> None:
    server = directives(UNITS / SERVER)
    assert server["Service.Restart"] == ["on-failure"]
    assert server["Service.RestartPreventExitStatus"] == [str(EXIT_UNREADABLE_FORMAT)]


@pytest.mark.parametrize("unit", [SERVER, MIGRATE])
def test_the_units_run_unprivileged(unit: str) -> None:
    service = directives(UNITS / unit)
    for key, value in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", ""),
        ("EnvironmentFile", "/etc/pinledger/pinledger.env"),
    ]:
        assert service[f"Service.{key}"] == [value], key


def test_the_example_environment_is_one_the_server_takes() -> None:
    settings = environment_file()
    config = Config.from_env(settings)
    assert config.host == "0.0.0.0"
    assert config.address == "pinledger-1.example.internal:9010"
    config.kafka_security()


def test_secrets_reach_the_server_as_credentials() -> None:
    """Each secret the drop-in loads is named by the *_FILE setting that reads it."""
    drop_in = directives(UNITS / DROP_IN)
    loaded = {entry.split(":")[0] for entry in drop_in["Service.LoadCredential"]}
    named = {entry.partition("=")[2] for entry in drop_in["Service.Environment"]}
    assert named == {f"%d/{name}" for name in loaded}
    settings = {entry.partition("=")[0] for entry in drop_in["Service.Environment"]}
    Config.from_env({name: "/dev/null" for name in settings if name.endswith("_FILE")})
