"""The Kafka settings every process of a config gets (service/assembly.py)."""

from __future__ import annotations

import pytest

from pinledger.service.assembly import kafka_settings, open_log
from pinledger.service.config import Config, ConfigError


def test_the_kafka_settings_carry_the_topic_policy_and_the_append_timeout() -> None:
    config = Config.from_env(
        {
            "PINLEDGER_KAFKA": "k:1",
            "PINLEDGER_SERVER_ID": "s1",
            "PINLEDGER_REPLICATION_FACTOR": "3",
            "PINLEDGER_APPEND_TIMEOUT_S": "2.5",
        }
    )
    settings = kafka_settings(config)
    assert settings.bootstrap == "k:1"
    assert settings.client_id == "s1"
    assert settings.topics == config.topic_policy()
    assert settings.append_timeout_ms == 2500


def test_a_tool_names_its_own_client() -> None:
    assert kafka_settings(Config(server_id="s1"), "pinledger-demo").client_id == "pinledger-demo"


def test_a_kafka_client_that_names_no_adapter_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"PINLEDGER_KAFKA_CLIENT.*kafka-python, librdkafka"):
        open_log(Config(server_id="s1", kafka_client="rdkafka"))
