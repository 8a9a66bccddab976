"""TLS on the Thrift and admin ports (docs/security.md, decision 0026): the server's
certificate and key, and, optionally, the CA whose client certificates alone get into
the Thrift port.

The handshake runs on the connection's own thread, bounded by HANDSHAKE_TIMEOUT_S, so a
slow or silent client never delays the accept loop, and a plaintext client fails it
at its first bytes: its connection is closed at once and its slot freed.
"""

from __future__ import annotations

import os
import socket
import ssl

from pinledger.service.config import Config, ConfigError
from pinledger.tlsconnect import connecting_context

HANDSHAKE_TIMEOUT_S = 10.0

# What OpenSSL says when the first bytes are not a TLS handshake at all.
_NOT_TLS = frozenset(
    {"WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "HTTP_REQUEST", "RECORD_LAYER_FAILURE"}
)


def server_context(config: Config, clients: bool = True) -> ssl.SSLContext | None:
    """The Thrift port's TLS context, or None when PINLEDGER_TLS_CERTFILE is not set;
    a ConfigError names the setting that cannot be used. `clients`: ask for client
    certificates when PINLEDGER_TLS_CLIENT_CAFILE is set (False: the admin port's, whose
    probes and browsers present none and whose pages have their own login)."""
    if not (config.tls_certfile or config.tls_keyfile):
        if config.tls_client_cafile:
            raise ConfigError(
                "PINLEDGER_TLS_CLIENT_CAFILE needs PINLEDGER_TLS_CERTFILE and "
                "PINLEDGER_TLS_KEYFILE: client certificates are asked for over TLS only"
            )
        return None
    if not (config.tls_certfile and config.tls_keyfile):
        raise ConfigError("TLS needs both PINLEDGER_TLS_CERTFILE and PINLEDGER_TLS_KEYFILE")
    _readable(
        PINLEDGER_TLS_CERTFILE=config.tls_certfile,
        PINLEDGER_TLS_KEYFILE=config.tls_keyfile,
        PINLEDGER_TLS_CLIENT_CAFILE=config.tls_client_cafile,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # No TLS 1.3 session tickets: clients pool their connections, so resumption would
    # buy little, and the server keeps no state for it.
    context.num_tickets = 0
    try:
        context.load_cert_chain(config.tls_certfile, config.tls_keyfile)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"PINLEDGER_TLS_CERTFILE={config.tls_certfile} with PINLEDGER_TLS_KEYFILE="
            f"{config.tls_keyfile}: {ssl_reason(exc)} (PEM files, the key of that certificate)"
        ) from None
    if config.tls_client_cafile and clients:
        try:
            context.load_verify_locations(cafile=config.tls_client_cafile)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"PINLEDGER_TLS_CLIENT_CAFILE={config.tls_client_cafile}: {ssl_reason(exc)} "
                "(PEM CA certificates)"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def described(config: Config) -> str:
    """How the Thrift port is secured, for the server's start line."""
    if not config.tls_certfile:
        return " (plaintext)"
    return " (TLS, client certificates required)" if config.tls_client_cafile else " (TLS)"


def admin_context(config: Config) -> ssl.SSLContext | None:
    """The admin port's TLS context: the Thrift port's certificate, no client's."""
    return server_context(config, clients=False)


def own_context(config: Config) -> ssl.SSLContext | None:
    """For the supervisor of `serve --processes` asking its own processes' admin ports:
    trusts exactly this server's certificate, which they share, whatever names it
    holds (they are reached at the bind address or loopback)."""
    if not config.tls_certfile:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=config.tls_certfile)
    # The certificate itself is the trust anchor, though a CA signed it.
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    context.check_hostname = False
    return context


def peer_context(config: Config) -> ssl.SSLContext | None:
    """How this server reaches the other servers' Thrift ports (forwarded dequeues),
    and the tools run with its settings reach it: over TLS when its own port speaks it,
    presenting its own certificate (they may require one), trusting
    PINLEDGER_TLS_CAFILE (else the system's CAs). None: plaintext."""
    if not config.tls_certfile:
        return None
    try:
        return connecting_context(
            config.tls_cafile, config.tls_certfile, config.tls_keyfile, config.tls_check_hostname
        )
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"PINLEDGER_TLS_CAFILE={config.tls_cafile or '(the system CAs)'} or the "
            f"server's certificate cannot be used to reach the other servers: {ssl_reason(exc)}"
        ) from None


def handshake(sock: socket.socket, context: ssl.SSLContext) -> ssl.SSLSocket:
    """The accepted connection over TLS; raises ssl.SSLError or OSError when the
    client does not complete a handshake this server accepts."""
    sock.settimeout(HANDSHAKE_TIMEOUT_S)
    # The TLS socket takes over the connection (`sock` is detached): close it on failure.
    secured = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
    try:
        secured.do_handshake()
    except BaseException:
        secured.close()
        raise
    return secured


def refusal(exc: BaseException) -> str:
    """Why a handshake failed, for the one log line about it."""
    if isinstance(exc, ssl.SSLError) and exc.reason in _NOT_TLS:
        return "not TLS (a plaintext client?)"
    if isinstance(exc, ssl.SSLError) and exc.reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return "no client certificate (PINLEDGER_TLS_CLIENT_CAFILE requires one)"
    if isinstance(exc, TimeoutError):
        return f"no handshake within {HANDSHAKE_TIMEOUT_S:g} s"
    return ssl_reason(exc)


def _readable(**files: str) -> None:
    for name, path in files.items():
        if path and not os.access(path, os.R_OK):
            raise ConfigError(f"{name}={path}: no such file, or not readable by this user")


def ssl_reason(exc: BaseException) -> str:
    """OpenSSL's reason in words ("certificate verify failed"), else the error's text."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).replace("_", " ").lower()
    return str(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)
