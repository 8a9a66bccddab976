"""TLS settings of the Thrift port and of its clients (service/security/tls.py,
client/tls.py, `pinledger client`'s flags): what each combination builds, and the one
clear error for each that cannot work. Certificates are made here with openssl."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

from pinledger.cli.tool_options import UsageError, parse_options
from pinledger.client.tls import Tls, TlsSettingsError
from pinledger.service.config import Config, ConfigError
from pinledger.service.security import tls


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 it signed, and an unrelated key."""
    where = tmp_path_factory.mktemp("certs")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=ca",
            "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=server",
            "-keyout", "server.key", "-out", "server.csr")  # fmt: skip
    (where / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext", "-out", "server.pem")  # fmt: skip
    openssl("genrsa", "-out", "other.key", "2048")
    # A second server certificate of the same CA, for another server.
    openssl("req", "-new", "-key", "other.key", "-subj", "/CN=other", "-out", "other.csr")
    openssl("x509", "-req", "-in", "other.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext", "-out", "other.pem")  # fmt: skip
    return where


def _handshake_over_a_pair(
    server: ssl.SSLContext, client: ssl.SSLContext | None, first: bytes = b""
) -> BaseException | None:
    """A handshake between `server` (through tls.handshake) and `client` on a socket
    pair; what the server side raised, or None. Without `client`, `first` is sent as
    a plaintext client's first bytes."""
    near, far = socket.socketpair()
    failed: list[BaseException] = []

    def serve() -> None:
        try:
            tls.handshake(near, server).close()
        except (OSError, ValueError) as exc:
            failed.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        if client is None:
            far.sendall(first)
        else:
            with contextlib.suppress(OSError):
                client.wrap_socket(far, server_hostname="127.0.0.1").close()
    finally:
        thread.join(10)
        far.close()
    return failed[0] if failed else None


def _config(**settings: str) -> Config:
    return Config(**settings)  # type: ignore[arg-type]


def test_no_certificate_means_a_plaintext_port() -> None:
    assert tls.server_context(Config()) is None
    assert tls.peer_context(Config()) is None
    assert tls.described(Config()) == " (plaintext)"


def test_a_certificate_and_its_key_make_a_tls_port(certs: Path) -> None:
    config = _config(tls_certfile=str(certs / "server.pem"), tls_keyfile=str(certs / "server.key"))
    context = tls.server_context(config)
    assert context is not None
    assert context.verify_mode == ssl.CERT_NONE  # no client certificate asked for
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert tls.described(config) == " (TLS)"


def test_a_client_ca_makes_client_certificates_required(certs: Path) -> None:
    config = _config(
        tls_certfile=str(certs / "server.pem"),
        tls_keyfile=str(certs / "server.key"),
        tls_client_cafile=str(certs / "ca.pem"),
        tls_cafile=str(certs / "ca.pem"),
    )
    context = tls.server_context(config)
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED
    assert tls.described(config) == " (TLS, client certificates required)"
    # Forwards to the other servers: over TLS, verifying them, with this server's own
    # certificate, which a server requiring client certificates takes.
    peer = tls.peer_context(config)
    assert peer is not None and peer.verify_mode == ssl.CERT_REQUIRED
    assert _handshake_over_a_pair(context, peer) is None
    anonymous = Tls(cafile=str(certs / "ca.pem")).context()
    refused = _handshake_over_a_pair(context, anonymous)
    assert refused is not None and "no client certificate" in tls.refusal(refused)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"tls_certfile": "server.pem"}, "needs both PINLEDGER_TLS_CERTFILE and"),
        ({"tls_keyfile": "server.key"}, "needs both PINLEDGER_TLS_CERTFILE and"),
        ({"tls_client_cafile": "ca.pem"}, "PINLEDGER_TLS_CLIENT_CAFILE needs"),
        (
            {"tls_certfile": "server.pem", "tls_keyfile": "other.key"},
            "key values mismatch",
        ),
        (
            {"tls_certfile": "server.pem", "tls_keyfile": "nowhere.key"},
            "PINLEDGER_TLS_KEYFILE=",
        ),
        (
            {"tls_certfile": "server.pem", "tls_keyfile": "server.key", "tls_client_cafile": "ext"},
            "PINLEDGER_TLS_CLIENT_CAFILE=",
        ),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_them(
    certs: Path, settings: dict[str, str], said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        tls.server_context(_config(**{k: str(certs / v) for k, v in settings.items()}))


def test_the_handshake_failures_are_worded_for_the_log() -> None:
    plaintext = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    plaintext.reason = "WRONG_VERSION_NUMBER"
    assert tls.refusal(plaintext) == "not TLS (a plaintext client?)"
    missing = ssl.SSLError(1, "peer did not return a certificate")
    missing.reason = "PEER_DID_NOT_RETURN_A_CERTIFICATE"
    assert "no client certificate" in tls.refusal(missing)
    untrusted = ssl.SSLError(1, "certificate verify failed")
    untrusted.reason = "CERTIFICATE_VERIFY_FAILED"
    assert tls.refusal(untrusted) == "certificate verify failed"
    assert "no handshake within" in tls.refusal(TimeoutError())


def test_a_client_context_verifies_the_server(certs: Path) -> None:
    context = Tls(cafile=str(certs / "ca.pem")).context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert not Tls(cafile=str(certs / "ca.pem"), check_hostname=False).context().check_hostname


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"certfile": "server.pem"}, "needs both a certfile and a keyfile"),
        ({"cafile": "nowhere.pem"}, "missing or not readable"),
        ({"certfile": "server.pem", "keyfile": "other.key"}, "key values mismatch"),
    ],
)
def test_client_files_that_cannot_work_are_refused(
    certs: Path, settings: dict[str, str], said: str
) -> None:
    with pytest.raises(TlsSettingsError, match=said):
        Tls(**{k: str(certs / v) for k, v in settings.items()}).context()  # type: ignore[arg-type]


def test_the_client_tool_flags() -> None:
    base = ["get_queue_names"]
    assert parse_options(base).tls is None
    assert parse_options([*base, "--tls"]).tls == Tls()
    assert parse_options([*base, "--tls_cafile", "ca.pem"]).tls == Tls(cafile="ca.pem")
    both = ["--tls_certfile", "c.pem", "--tls_keyfile", "c.key"]
    assert parse_options([*base, *both]).tls == Tls(certfile="c.pem", keyfile="c.key")
    with pytest.raises(UsageError, match="both --tls_certfile and --tls_keyfile"):
        parse_options([*base, "--tls_certfile", "c.pem"])


def _server(certs: Path, name: str = "server") -> ssl.SSLContext:
    context = tls.server_context(
        _config(tls_certfile=str(certs / f"{name}.pem"), tls_keyfile=str(certs / f"{name}.key"))
    )
    assert context is not None
    return context


def test_a_plaintext_client_fails_the_handshake_at_its_first_bytes(certs: Path) -> None:
    refused = _handshake_over_a_pair(_server(certs), None, b"\x00\x00\x00\x20\x80\x01" + bytes(32))
    assert refused is not None and tls.refusal(refused) == "not TLS (a plaintext client?)"


def test_a_client_trusting_the_ca_completes_the_handshake(certs: Path) -> None:
    client = Tls(cafile=str(certs / "ca.pem")).context()
    assert _handshake_over_a_pair(_server(certs), client) is None


def test_the_supervisor_trusts_exactly_its_own_certificate(certs: Path) -> None:
    """own_context: the server's certificate is the trust anchor, though a CA signed
    it; another certificate of the same CA is refused."""
    own = tls.own_context(
        _config(tls_certfile=str(certs / "server.pem"), tls_keyfile=str(certs / "server.key"))
    )
    assert own is not None
    assert _handshake_over_a_pair(_server(certs), own) is None
    assert _handshake_over_a_pair(_server(certs, "other"), own) is not None
