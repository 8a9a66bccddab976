"""`pinledger config`: each setting's value and where it came from, as the server reads
them; secrets never shown, not even in an error; `--check` tells every problem the
server would stop at, one line each, without starting or connecting."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinledger.cli import config as config_cli
from pinledger.cli.main import build_parser
from pinledger.service.config import Config
from pinledger.service.security.password import hash_password_scrypt

# Every setting Config has: `--check` counts them.
SETTINGS = len(dataclasses.fields(Config))

# Planted where each kind of secret can come from; none may be printed.
ENV_SECRET = "env-Secret-7c1e"
FILE_SECRET = "file-Secret-93ab"
SECRET_FILE_SECRET = hash_password_scrypt("the admin password")
DSN_SECRET = "dsn-Secret-40fd"
KEYWORD_DSN_SECRET = "kw-Secret-e2d8"
SECRETS = (ENV_SECRET, FILE_SECRET, SECRET_FILE_SECRET, DSN_SECRET, KEYWORD_DSN_SECRET)


def _run(
    env: dict[str, str], *flags: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    code = config_cli.run(build_parser().parse_args(["config", *flags]), env)
    out, err = capsys.readouterr()
    return code, out, err


def _secrets_everywhere(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "pinledger.toml"
    path.write_text(
        f'kafka_sasl_password = "{FILE_SECRET}"\n'
        'kafka_sasl_username = "pinledger"\n'
        'kafka_sasl_mechanism = "SCRAM-SHA-512"\n'
        'kafka_security_protocol = "SASL_SSL"\n'
        "partitions = 8\n"
    )
    hash_file = tmp_path / "admin-hash"
    hash_file.write_text(SECRET_FILE_SECRET + "\n")
    return {
        "PINLEDGER_CONFIG": str(path),
        "PINLEDGER_METRICS_TOKEN": ENV_SECRET,
        "PINLEDGER_ADMIN_PASSWORD_HASH_FILE": str(hash_file),
        "PINLEDGER_STORE_DSN": f"postgresql://pin:{DSN_SECRET}@db:5432/x?sslmode=require",
        "PINLEDGER_PG_DSN": f"host=db password='{KEYWORD_DSN_SECRET}' dbname=x",
        "PINLEDGER_PORT": "9200",
    }


def test_the_table_says_each_settings_value_and_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _secrets_everywhere(tmp_path)
    code, out, err = _run(env, capsys=capsys)
    assert (code, err) == (0, "")
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert out.splitlines()[0] == f"config file: {env['PINLEDGER_CONFIG']} (PINLEDGER_CONFIG)"
    assert rows["port"].split() == ["port", "9200", "env", "PINLEDGER_PORT"]
    assert rows["partitions"].split() == ["partitions", "8", "file", env["PINLEDGER_CONFIG"]]
    assert rows["max_priority"].split() == ["max_priority", "3", "default"]
    assert rows["kafka_sasl_password"].split() == [
        "kafka_sasl_password",
        "***",
        "file",
        env["PINLEDGER_CONFIG"],
    ]
    assert rows["admin_password_hash"].split() == [
        "admin_password_hash",
        "***",
        "secret",
        "file",
        env["PINLEDGER_ADMIN_PASSWORD_HASH_FILE"],
        "(PINLEDGER_ADMIN_PASSWORD_HASH_FILE)",
    ]
    assert rows["store_dsn"].split()[1] == "postgresql://pin:***@db:5432/x?sslmode=require"
    assert rows["admin_salt"].split()[:3] == ["admin_salt", "(empty)", "default"]
    # Aligned: every value starts in one column, every source in another.
    assert len({line.index(" 9200 ") for line in out.splitlines() if " 9200 " in line}) == 1
    assert len({line.rindex("  ") for line in out.splitlines()[1:]}) == 1


def test_json_has_the_values_and_their_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _secrets_everywhere(tmp_path)
    code, out, _ = _run(env, "--json", capsys=capsys)
    answer = json.loads(out)
    assert code == 0 and answer["file"] == env["PINLEDGER_CONFIG"] and answer["problems"] == []
    settings = answer["settings"]
    assert settings["port"] == {"value": 9200, "source": "env", "variable": "PINLEDGER_PORT"}
    assert settings["partitions"] == {
        "value": 8,
        "source": "file",
        "path": env["PINLEDGER_CONFIG"],
    }
    assert settings["claim_timeout_s"] == {"value": 600.0, "source": "default"}
    assert settings["kafka_ssl_check_hostname"] == {"value": True, "source": "default"}
    assert settings["metrics_token"]["value"] == "***"
    assert settings["admin_password_hash"] == {
        "value": "***",
        "source": "secret_file",
        "variable": "PINLEDGER_ADMIN_PASSWORD_HASH_FILE",
        "path": env["PINLEDGER_ADMIN_PASSWORD_HASH_FILE"],
    }
    assert settings["admin_salt"] == {"value": "", "source": "default"}
    assert settings["pg_dsn"]["value"] == "host=db password=*** dbname=x"


def test_no_secret_is_printed_in_the_table_json_or_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _secrets_everywhere(tmp_path)
    printed = []
    for flags in ([], ["--json"], ["--check"], ["--check", "--json"]):
        code, out, err = _run(env, *flags, capsys=capsys)
        assert code == 0, err
        printed.append(out + err)
    assert f"valid: {SETTINGS} settings" in printed[2]
    for secret in SECRETS:
        assert not [p for p in printed if secret in p], f"a secret was printed: {secret}"


def test_no_secret_is_printed_in_checks_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _secrets_everywhere(tmp_path)
    # Each of these makes a check quote what it got, or name the secret's setting.
    del env["PINLEDGER_ADMIN_PASSWORD_HASH_FILE"]
    broken = {
        **env,
        # A "hash" that is no hash (the secret itself) ...
        "PINLEDGER_ADMIN_PASSWORD_HASH": f"scrypt${ENV_SECRET}",
        # ... and PinLater's form besides it.
        "PINLEDGER_ADMIN_PASSWORD_SHA256": FILE_SECRET,
        # The Kafka password set, but not SASL.
        "PINLEDGER_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
        # The token both from the environment and a file.
        "PINLEDGER_METRICS_TOKEN_FILE": str(tmp_path / "missing"),
    }
    shards = tmp_path / "shards.json"
    shards.write_text(
        json.dumps({"shards": [{"name": "a", "dsn": f"host=db password={DSN_SECRET}"}]})
    )
    broken["PINLEDGER_STORE_SHARDS"] = str(shards)
    for flags in (["--check"], ["--check", "--json"], [], ["--json"]):
        code, out, err = _run(broken, *flags, capsys=capsys)
        assert code == 1
        for secret in SECRETS:
            assert secret not in out + err, f"{secret} printed by config {flags}"
    # The load problem is told first; the server's start checks follow once it is fixed.
    code, _, err = _run(broken, "--check", capsys=capsys)
    assert err.splitlines() == [
        "pinledger config: set PINLEDGER_METRICS_TOKEN or PINLEDGER_METRICS_TOKEN_FILE, not both"
    ]
    del broken["PINLEDGER_METRICS_TOKEN_FILE"]
    code, _, err = _run(broken, "--check", capsys=capsys)
    assert code == 1
    assert err.splitlines() == [
        "pinledger config: set PINLEDGER_ADMIN_PASSWORD_HASH or PINLEDGER_ADMIN_PASSWORD_SHA256, "
        "not both",
        "pinledger config: PINLEDGER_KAFKA_SASL_* are set but PINLEDGER_KAFKA_SECURITY_PROTOCOL "
        "is PLAINTEXT: set it to SASL_SSL (or SASL_PLAINTEXT) to log in with them",
        f"pinledger config: {shards}: shards[0] ('a'): dsn must be a postgresql:// or mysql:// "
        "URL, got host=db password=***",
    ]


def test_check_passes_a_valid_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run({}, "--check", capsys=capsys)
    assert (code, out, err) == (0, f"valid: {SETTINGS} settings, all defaults\n", "")
    code, out, _ = _run({"PINLEDGER_PORT": "9011"}, "--check", "--json", capsys=capsys)
    assert (code, json.loads(out)) == (0, {"valid": True, "problems": []})


def test_check_tells_every_problem_on_a_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "pinledger.toml"
    path.write_text('prot = 1\nclaim_timeout_s = "soon"\n')
    code, out, err = _run(
        {"PINLEDGER_CONFIG": str(path), "PINLEDGER_PARTITIONS": "0"}, "--check", capsys=capsys
    )
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert len(lines) == 3 and all(line.startswith("pinledger config: ") for line in lines)
    assert f"config file {path}: unknown setting(s) prot;" in lines[0]
    # The settings' problems in their order (Config's).
    assert lines[1] == (
        "pinledger config: setting partitions (PINLEDGER_PARTITIONS) must be at least 1, got '0'"
    )
    assert lines[2] == (
        f"pinledger config: setting claim_timeout_s (in {path}) must be a number (float), "
        "got 'soon'"
    )


def test_check_makes_the_checks_the_server_makes_at_its_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queues = tmp_path / "queues.json"
    queues.write_text('{"queues": [{"name": "q", "queueConfig": {"maxJobsPerSecnd": 2}}]}')
    env = {
        "PINLEDGER_MAX_RECORD_BYTES": "600000",
        "PINLEDGER_KAFKA_CLIENT": "kafka-java",
        "PINLEDGER_TLS_CLIENT_CAFILE": str(tmp_path / "ca.pem"),
        "PINLEDGER_STORE_SHARDS": str(tmp_path / "missing-shards.json"),
        "PINLEDGER_QUEUE_CONFIG": str(queues),
    }
    code, out, err = _run(env, "--check", capsys=capsys)
    assert (code, out) == (1, "")
    said = err.splitlines()
    assert len(said) == 5, err
    assert "PINLEDGER_MAX_RECORD_BYTES=600000 leaves no room for a job" in said[0]
    assert "setting kafka_client (PINLEDGER_KAFKA_CLIENT) must be one of" in said[1]
    assert "PINLEDGER_TLS_CLIENT_CAFILE needs PINLEDGER_TLS_CERTFILE" in said[2]
    assert f"cannot read shard map {tmp_path / 'missing-shards.json'}" in said[3]
    assert "unknown key 'maxJobsPerSecnd'" in said[4]
    # Without --check, the settings are shown: each could be read.
    code, _, err = _run(env, capsys=capsys)
    assert (code, err) == (0, "")


def test_a_value_that_cannot_be_used_is_shown_as_given_and_marked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run({"PINLEDGER_ADMIN_PORT": "abc"}, capsys=capsys)
    assert code == 1
    row = next(line for line in out.splitlines() if line.startswith("admin_port "))
    assert row.split() == ["admin_port", "abc", "(invalid)", "env", "PINLEDGER_ADMIN_PORT"]
    assert err == (
        "pinledger config: setting admin_port (PINLEDGER_ADMIN_PORT) must be a number (int), "
        "got 'abc'\n"
    )


def test_a_drivers_message_quoting_a_password_is_scrubbed() -> None:
    scrub = config_cli.Scrubber(
        {"store_dsn": f"host=db password='{DSN_SECRET} more'", "pg_dsn": "", "admin_salt": ""},
        [f"mysql://pin:{ENV_SECRET}@db/x"],
    )
    quoted = f'missing "=" after "more" ({DSN_SECRET}; {ENV_SECRET})'
    # Each word of a password too: libpq quotes the word after a space it did not expect.
    assert scrub(quoted) == 'missing "=" after "***" (***; ***)'


def test_the_command_through_the_real_entry_point(tmp_path: Path) -> None:
    """`python -m pinledger config`, as an operator runs it: the other commands' settings
    check (which stops at the first problem, exit 2) does not stand in its way."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        **_secrets_everywhere(tmp_path),
        "PINLEDGER_ADMIN_PORT": "abc",
    }
    shown = subprocess.run(
        [sys.executable, "-m", "pinledger", "config", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 1
    answer = json.loads(shown.stdout)
    assert answer["settings"]["port"] == {
        "value": 9200,
        "source": "env",
        "variable": "PINLEDGER_PORT",
    }
    assert answer["settings"]["admin_port"]["invalid"] is True
    assert answer["problems"] == [
        "setting admin_port (PINLEDGER_ADMIN_PORT) must be a number (int), got 'abc'"
    ]
    del env["PINLEDGER_ADMIN_PORT"]
    checked = subprocess.run(
        [sys.executable, "-m", "pinledger", "config", "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (checked.returncode, checked.stderr) == (0, "")
    assert checked.stdout.startswith(f"valid: {SETTINGS} settings: ")
    for secret in SECRETS:
        assert secret not in shown.stdout + shown.stderr + checked.stdout


def test_a_certificate_that_cannot_be_used_is_one_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The Thrift port and the forwards to other servers use it both: said once.
    (tmp_path / "server.pem").write_text("not a certificate\n")
    (tmp_path / "server.key").write_text("not a key\n")
    env = {
        "PINLEDGER_TLS_CERTFILE": str(tmp_path / "server.pem"),
        "PINLEDGER_TLS_KEYFILE": str(tmp_path / "server.key"),
    }
    code, _, err = _run(env, "--check", capsys=capsys)
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(
        f"pinledger config: PINLEDGER_TLS_CERTFILE={tmp_path / 'server.pem'} with "
        f"PINLEDGER_TLS_KEYFILE={tmp_path / 'server.key'}: "
    )
    assert line.endswith("(PEM files, the key of that certificate)")
