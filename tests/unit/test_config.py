"""Settings: defaults, then the TOML file, then the environment."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pinledger.service.config import Config, ConfigError, Source, load


def test_defaults_are_the_documented_ones() -> None:
    config = Config.from_env({})
    assert (config.port, config.admin_port, config.partitions) == (9010, 9999, 4)
    assert config.claim_timeout_s == 600 and config.succeeded_ttl_s == 24 * 3600
    assert config.failed_ttl_s == 168 * 3600 and config.max_priority == 3
    assert config.server_id  # hostname:pid


@pytest.mark.parametrize(
    ("server_id", "said"),
    [("a\x00b", "contains NUL"), ("s" * 321, "is 321 characters, the limit is 320")],
)
def test_a_server_id_no_store_can_hold_is_refused(server_id: str, said: str) -> None:
    # It is in every record the server appends and every claim it makes.
    with pytest.raises(ConfigError, match=rf"PINLEDGER_SERVER_ID\) {said}"):
        Config.from_env({"PINLEDGER_SERVER_ID": server_id})


def test_file_then_environment(tmp_path: Path) -> None:
    path = tmp_path / "pinledger.toml"
    path.write_text('port = 9100\nclaim_timeout_s = 30\nschema = "from_file"\n')
    config = Config.from_env({"PINLEDGER_CONFIG": str(path), "PINLEDGER_PORT": "9200"})
    assert (config.port, config.claim_timeout_s, config.schema) == (9200, 30.0, "from_file")


def test_bad_settings_say_which_and_why(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"PINLEDGER_PORT\) must be a number"):
        Config.from_env({"PINLEDGER_PORT": "abc"})
    with pytest.raises(ConfigError, match="finite"):
        Config.from_env({"PINLEDGER_CLAIM_TIMEOUT_S": "inf"})
    with pytest.raises(ConfigError, match="at least 1"):
        Config.from_env({"PINLEDGER_PARTITIONS": "0"})
    with pytest.raises(ConfigError, match="TCP port"):
        Config.from_env({"PINLEDGER_ADMIN_PORT": "70000"})
    with pytest.raises(ConfigError, match="must not be negative"):
        Config.from_env({"PINLEDGER_CLAIM_TIMEOUT_S": "-1"})
    path = tmp_path / "bad.toml"
    path.write_text("prot = 1\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        Config.from_env({"PINLEDGER_CONFIG": str(path)})
    path.write_text("port = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        Config.from_env({"PINLEDGER_CONFIG": str(path)})
    with pytest.raises(ConfigError, match="cannot read"):
        Config.from_env({"PINLEDGER_CONFIG": str(tmp_path / "missing.toml")})


def test_advertised_address() -> None:
    assert Config.from_env({"PINLEDGER_PORT": "9011"}).address == "127.0.0.1:9011"
    config = Config.from_env({"PINLEDGER_HOST": "0.0.0.0", "PINLEDGER_ADVERTISE_HOST": "h1"})
    assert config.address == "h1:9010"


def test_topic_policy_leaves_replication_to_the_broker_and_keeps_the_ledger() -> None:
    policy = Config.from_env({}).topic_policy()
    assert (policy.replication_factor, policy.min_insync_replicas, policy.retention_ms) == (
        None,
        None,
        -1,
    )
    chosen = Config.from_env(
        {
            "PINLEDGER_REPLICATION_FACTOR": "3",
            "PINLEDGER_MIN_INSYNC_REPLICAS": "2",
            "PINLEDGER_RETENTION_DAYS": "30",
        }
    ).topic_policy()
    assert (chosen.replication_factor, chosen.min_insync_replicas) == (3, 2)
    assert chosen.retention_ms == 30 * 86_400_000


def test_the_record_limit_leaves_room_for_the_largest_job_and_no_more_than_producers_send() -> None:
    assert Config().record_limit() == 1_000_000
    assert Config.from_env({"PINLEDGER_MAX_RECORD_BYTES": "2000000"}).record_limit() == 2_000_000
    with pytest.raises(ConfigError, match="leaves no room for a job of PINLEDGER_MAX_BODY_BYTES"):
        Config(max_record_bytes=600_000).record_limit()
    assert Config(max_record_bytes=600_000, max_body_bytes=300_000).record_limit() == 600_000
    with pytest.raises(ConfigError, match="over the 4194304 bytes the Kafka producers send"):
        Config(max_record_bytes=5_000_000, max_body_bytes=3_000_000).record_limit()
    with pytest.raises(ConfigError, match="must be at least 1"):
        Config.from_env({"PINLEDGER_MAX_RECORD_BYTES": "0"})


def test_each_setting_says_where_it_came_from_as_the_server_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "pinledger.toml"
    path.write_text('port = 9100\nschema = "from_file"\nkafka_ssl_check_hostname = false\n')
    token = tmp_path / "token"
    token.write_text("tok\n")
    env = {
        "PINLEDGER_CONFIG": str(path),
        "PINLEDGER_PORT": "9200",
        "PINLEDGER_METRICS_TOKEN_FILE": str(token),
    }
    loaded = load(env)
    assert loaded.file == str(path) and loaded.problems == ()
    # The environment wins over the file, the file over the default.
    assert loaded.values["port"] == 9200 and loaded.sources["port"] == Source(
        "env", "PINLEDGER_PORT"
    )
    assert loaded.values["schema"] == "from_file"
    assert loaded.sources["schema"] == Source("file", path=str(path))
    assert loaded.values["kafka_ssl_check_hostname"] is False
    assert loaded.values["partitions"] == 4 and loaded.sources["partitions"] == Source("default")
    assert loaded.sources["server_id"] == Source("default")
    assert loaded.values["metrics_token"] == "tok"
    assert loaded.sources["metrics_token"] == Source(
        "secret_file", "PINLEDGER_METRICS_TOKEN_FILE", str(token)
    )
    assert str(loaded.sources["metrics_token"]) == (
        f"secret file {token} (PINLEDGER_METRICS_TOKEN_FILE)"
    )
    # The same loader is the server's: its Config holds exactly these values.
    assert dataclasses.asdict(Config.from_env(env)) == dict(loaded.values)
    assert set(loaded.sources) == {f.name for f in dataclasses.fields(Config)}


def test_a_bad_value_names_the_file_it_came_from_and_every_problem_is_told(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pinledger.toml"
    path.write_text('port = "abc"\nprot = 1\n')
    loaded = load({"PINLEDGER_CONFIG": str(path), "PINLEDGER_PARTITIONS": "0"})
    assert loaded.problems == (
        f"config file {path}: unknown setting(s) prot; known: "
        + ", ".join(sorted(f.name for f in dataclasses.fields(Config))),
        f"setting port (in {path}) must be a number (int), got 'abc'",
        "setting partitions (PINLEDGER_PARTITIONS) must be at least 1, got '0'",
    )
    # The value that could not be used is kept as given, for `pinledger config` to show.
    assert loaded.values["port"] == "abc"
    with pytest.raises(ConfigError, match="unknown setting"):
        loaded.checked()


def test_every_setting_says_what_it_does() -> None:
    for f in dataclasses.fields(Config):
        assert f.metadata["doc"].endswith("."), f"{f.name} has no description in Config"
