"""TLS to a pinledger server's Thrift port, as a client: which CA the server's
certificate must chain to, and the client certificate to present when the server asks
for one (PINLEDGER_TLS_CLIENT_CAFILE on the server). docs/security.md says who needs
what."""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

from pinledger.client.errors import ClientError
from pinledger.tlsconnect import connecting_context


class TlsSettingsError(ClientError, ValueError):
    """A TLS setting cannot be used; the message names the setting and the file."""


@dataclass(frozen=True, slots=True)
class Tls:
    """TLS on: the server must present a certificate this client trusts, issued for the
    host name or address the client connects to (unless `check_hostname` is off)."""

    # PEM CA certificates the server's must chain to; empty: the system's CAs.
    cafile: str = ""
    # A client certificate and its key (PEM), for a server that requires one.
    certfile: str = ""
    keyfile: str = ""
    check_hostname: bool = True

    def context(self) -> ssl.SSLContext:
        """An SSLContext for connecting: TLS 1.2 or later, the server verified."""
        if bool(self.certfile) != bool(self.keyfile):
            raise TlsSettingsError("a client certificate needs both a certfile and a keyfile")
        for what, path in (("CA", self.cafile), ("certificate", self.certfile)):
            if path and not os.access(path, os.R_OK):
                raise TlsSettingsError(f"TLS {what} file {path}: missing or not readable")
        try:
            return connecting_context(self.cafile, self.certfile, self.keyfile, self.check_hostname)
        except (ssl.SSLError, OSError) as exc:
            raise TlsSettingsError(
                f"cannot load the TLS files ({self.cafile or 'system CAs'}, "
                f"{self.certfile or 'no client certificate'}): {exc}"
            ) from None
