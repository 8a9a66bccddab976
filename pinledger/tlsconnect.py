"""The TLS context of a connection to a pinledger server's Thrift port, for whoever
connects: the client library (client/tls.py) and a server forwarding to another, or a
tool run with a server's settings (service/security/tls.py). Shared as the IDL is, since the
client may not import the service."""

from __future__ import annotations

import ssl


def connecting_context(
    cafile: str, certfile: str, keyfile: str, check_hostname: bool
) -> ssl.SSLContext:
    """TLS 1.2 or later, the server's certificate verified against `cafile` (PEM; empty:
    the system's CAs) and, with `check_hostname`, for the name connected to; presenting
    `certfile` with `keyfile` when given. Raises ssl.SSLError or OSError when a file
    cannot be used."""
    context = ssl.create_default_context(cafile=cafile or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    if certfile:
        context.load_cert_chain(certfile, keyfile or None)
    return context
