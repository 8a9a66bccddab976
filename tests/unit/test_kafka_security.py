"""Kafka security settings (service/config.py kafka_security, ledger/kafka/settings.py
KafkaSecurity): what each adapter is given, secrets read from files, and a clear error
naming the setting for every combination that cannot work, without the secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinledger.ledger.kafka.errors import closed_at_login, explanation
from pinledger.ledger.kafka.settings import KafkaSettings, security_options
from pinledger.ledger.log import KafkaSecurity
from pinledger.ledger.rdkafka import config as rdkafka_config
from pinledger.service.assembly import kafka_settings
from pinledger.service.config import Config, ConfigError

SECRET = "s3cret-Pa55word"


def _config(**env: str) -> Config:
    return Config.from_env({f"PINLEDGER_{k.upper()}": v for k, v in env.items()})


def _pem(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return str(path)


def test_plaintext_by_default_and_both_adapters_say_so() -> None:
    security = Config().kafka_security()
    assert security == KafkaSecurity()
    assert KafkaSettings().connection()["security_protocol"] == "PLAINTEXT"
    assert rdkafka_config.connection(KafkaSettings())["security.protocol"] == "plaintext"


def test_sasl_ssl_with_a_password_file_reaches_both_adapters(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(SECRET + "\n")  # as a mounted secret often ends
    cafile = _pem(tmp_path, "ca.pem")
    config = _config(
        kafka_security_protocol="sasl_ssl",
        kafka_sasl_mechanism="scram-sha-512",
        kafka_sasl_username="pinledger",
        kafka_sasl_password_file=str(secret),
        kafka_ssl_cafile=cafile,
    )
    settings = kafka_settings(config)
    assert settings.connection() | {"bootstrap_servers": "x"} == {
        "bootstrap_servers": "x",
        "reconnect_backoff_max_ms": 1000,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "pinledger",
        "sasl_plain_password": SECRET,
        "ssl_check_hostname": True,
        "ssl_cafile": cafile,
    }
    rd = rdkafka_config.producer(settings)
    assert (rd["security.protocol"], rd["sasl.mechanism"]) == ("sasl_ssl", "SCRAM-SHA-512")
    assert (rd["sasl.username"], rd["sasl.password"]) == ("pinledger", SECRET)
    assert (rd["ssl.ca.location"], rd["ssl.endpoint.identification.algorithm"]) == (
        cafile,
        "https",
    )
    for shown in (repr(config), repr(settings), repr(settings.security), str(config)):
        assert SECRET not in shown


def test_a_client_certificate_and_no_hostname_check(tmp_path: Path) -> None:
    cert, key = _pem(tmp_path, "client.pem"), _pem(tmp_path, "client.key")
    security = _config(
        kafka_security_protocol="SSL",
        kafka_ssl_certfile=cert,
        kafka_ssl_keyfile=key,
        kafka_ssl_check_hostname="false",
    ).kafka_security()
    assert security_options(security) == {
        "security_protocol": "SSL",
        "ssl_check_hostname": False,
        "ssl_certfile": cert,
        "ssl_keyfile": key,
    }
    librdkafka = rdkafka_config.connection(KafkaSettings(security=security))
    assert {k: v for k, v in librdkafka.items() if k.startswith(("security", "ssl", "sasl"))} == {
        "security.protocol": "ssl",
        "ssl.endpoint.identification.algorithm": "none",
        "ssl.certificate.location": cert,
        "ssl.key.location": key,
    }


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"kafka_security_protocol": "TLS"}, "PINLEDGER_KAFKA_SECURITY_PROTOCOL"),
        (
            {"kafka_security_protocol": "SASL_SSL", "kafka_sasl_username": "u"},
            "needs PINLEDGER_KAFKA_SASL_MECHANISM",
        ),
        (
            {
                "kafka_security_protocol": "SASL_SSL",
                "kafka_sasl_mechanism": "GSSAPI",
                "kafka_sasl_username": "u",
                "kafka_sasl_password": SECRET,
            },
            "needs PINLEDGER_KAFKA_SASL_MECHANISM, one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        ),
        (
            {"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": "PLAIN"},
            "needs PINLEDGER_KAFKA_SASL_USERNAME and PINLEDGER_KAFKA_SASL_PASSWORD",
        ),
        ({"kafka_sasl_password": SECRET}, "set it to SASL_SSL"),
        ({"kafka_ssl_cafile": "/etc/hostname"}, "set it to SSL or SASL_SSL"),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_certfile": "/etc/hostname"},
            "needs both PINLEDGER_KAFKA_SSL_CERTFILE and PINLEDGER_KAFKA_SSL_KEYFILE",
        ),
        (
            {"kafka_security_protocol": "SSL", "kafka_ssl_cafile": "/nonexistent/ca.pem"},
            "PINLEDGER_KAFKA_SSL_CAFILE=/nonexistent/ca.pem: no such file",
        ),
    ],
)
def test_settings_that_cannot_work_name_the_setting_and_not_the_secret(
    env: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        _config(**env).kafka_security()
    assert says in str(refused.value)
    assert SECRET not in str(refused.value)


def test_a_secret_file_that_cannot_be_read_or_a_secret_set_twice_is_refused(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"PINLEDGER_KAFKA_SASL_PASSWORD_FILE=.*cannot read"):
        _config(kafka_sasl_password_file=str(tmp_path / "missing"))
    secret = tmp_path / "password"
    secret.write_text(SECRET)
    with pytest.raises(ConfigError, match="not both") as twice:
        _config(kafka_sasl_password="other", kafka_sasl_password_file=str(secret))
    assert SECRET not in str(twice.value)


@pytest.mark.parametrize(("text", "value"), [("true", True), ("0", False), ("No", False)])
def test_a_yes_or_no_setting_reads_the_usual_words(text: str, value: bool) -> None:
    assert _config(kafka_ssl_check_hostname=text).kafka_ssl_check_hostname is value


def test_a_yes_or_no_setting_refuses_anything_else() -> None:
    with pytest.raises(ConfigError, match="must be true or false"):
        _config(kafka_ssl_check_hostname="maybe")


@pytest.mark.parametrize(
    ("logged", "says"),
    [
        (
            "Connection lost: [Error 58] SaslAuthenticationFailedError: Authentication failed "
            "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
            "PINLEDGER_KAFKA_SASL_PASSWORD",
        ),
        (
            "Connection lost: KafkaConnectionError: Handshake failed: [SSL: "
            "CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate",
            "PINLEDGER_KAFKA_SSL_CAFILE",
        ),
        (
            "Connection lost: KafkaConnectionError: [SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 "
            "alert bad certificate (_ssl.c:2580)",
            "PINLEDGER_KAFKA_SSL_CERTFILE",
        ),
        (
            "Connection lost: InvalidReceiveError: Invalid frame length: 352518912",
            "PINLEDGER_KAFKA_SECURITY_PROTOCOL",
        ),
    ],
)
def test_a_failed_connection_is_explained_by_what_kafka_python_logged(
    logged: str, says: str
) -> None:
    noise = "Bootstrap bootstrap-0 not ready; waiting 0.98 secs"
    reason = explanation([noise, logged, noise])
    assert reason is not None and says in reason
    assert logged.rpartition("Connection lost: ")[2] in reason


def test_nothing_telling_in_the_logs_explains_nothing() -> None:
    assert explanation(["Bootstrap bootstrap-0 not ready", "socket disconnected"]) is None
    assert explanation([]) is None


def test_a_sasl_connection_closed_after_the_version_exchange_reads_as_a_refused_login() -> None:
    """kafka-python often sees a refused login's close before its answer: the lines it
    logged then (a CPU-starved run) still tell a refused login from a broker not there."""
    lost = (
        "<KafkaConnection node_id=bootstrap-0 broker_version=(4, 3) (disconnected)>: "
        "Connection lost: KafkaConnectionError: socket disconnected"
    )
    noise = "Bootstrap connection to bootstrap-0 failed: KafkaConnectionError: socket disconnected"
    assert explanation([noise, lost]) is None
    reason = closed_at_login([noise, lost])
    assert reason is not None and "PINLEDGER_KAFKA_SASL_PASSWORD" in reason
    before_versions = lost.replace("broker_version=(4, 3)", "broker_version=unknown")
    refused = "Connection lost: KafkaConnectionError: [Errno 111] Connection refused"
    assert closed_at_login([noise, before_versions, refused]) is None
