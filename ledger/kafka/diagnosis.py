"""Why a TLS connection to a broker fails, found by making one with Python's ssl and
the client's own settings: kafka-python does not log a broker's refusal of a client
certificate (TLS 1.3 sends it after the handshake), so "Unable to bootstrap" alone
would be all a user saw (errors.py uses this when its logs say nothing)."""

from __future__ import annotations

import socket
import ssl

from pinledger.ledger.log import KafkaSecurity

_PROBE_TIMEOUT_S = 5.0
# How long the probe waits for the broker's verdict on its certificate after the
# handshake: a broker that accepted it waits for a request and sends nothing.
_VERDICT_S = 1.0


def tls_problem(bootstrap: str, security: KafkaSecurity) -> str | None:
    """What is wrong with TLS to the first bootstrap broker, with what to check; None
    when a TLS session with the client's settings is accepted (or TLS is not used, or
    the broker cannot be reached at all)."""
    if not security.uses_ssl:
        return None
    host, _, port = bootstrap.split(",", maxsplit=1)[0].strip().rpartition(":")
    context = ssl.create_default_context(cafile=security.ssl_cafile or None)
    context.check_hostname = security.ssl_check_hostname
    if security.ssl_certfile:
        try:
            context.load_cert_chain(security.ssl_certfile, security.ssl_keyfile or None)
        except (OSError, ssl.SSLError) as exc:
            return (
                f"cannot load the client certificate (PINLEDGER_KAFKA_SSL_CERTFILE, "
                f"PINLEDGER_KAFKA_SSL_KEYFILE): {exc}"
            )
    try:
        with (
            socket.create_connection((host, int(port)), timeout=_PROBE_TIMEOUT_S) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            tls.settimeout(_VERDICT_S)
            try:
                tls.recv(1)
            except TimeoutError:
                return None
    except ssl.SSLCertVerificationError as exc:
        return (
            "this client does not trust the broker's certificate: set "
            "PINLEDGER_KAFKA_SSL_CAFILE to the CA that signed it (a certificate that does "
            f"not name the host in PINLEDGER_KAFKA is refused too): {exc.verify_message}"
        )
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        if "CERTIFICATE" in reason or "UNKNOWN_CA" in reason:
            return (
                "the broker refused this client's certificate, or wants one: set "
                "PINLEDGER_KAFKA_SSL_CERTFILE and PINLEDGER_KAFKA_SSL_KEYFILE to a "
                f"certificate signed by a CA the broker trusts (TLS alert: {reason})"
            )
        return f"the TLS handshake failed ({reason}): check PINLEDGER_KAFKA_SECURITY_PROTOCOL"
    except (OSError, ValueError):
        return None
    return None
