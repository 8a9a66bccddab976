"""Forwarding dequeues to the servers that own a queue's other partitions: a small
pool of framed Thrift clients per peer address."""

from __future__ import annotations

import ssl
import threading
from typing import Any

from thriftpy2.protocol import TCyBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TCyFramedTransportFactory

from pinledger.idl import pinlater
from pinledger.ledger.clock import SYSTEM_CLOCK, Clock
from pinledger.service.api.requests import Caller, DequeueRequest
from pinledger.service.config import Config

_IDLE_PER_PEER = 8
# A pooled connection idle longer than this is closed instead of reused: a peer closes
# connections idle past its PINLEDGER_IDLE_TIMEOUT_S (600 s by default), and a
# forwarded dequeue sent on a connection the peer closed would fail.
_MAX_IDLE_S = 60.0


class PeerPool:
    def __init__(
        self,
        timeout_ms: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """`timeout_ms`: how long a forwarded dequeue is waited for; None: the default
        config's (Config.forward_timeout_s, which outlasts the peer's claim append).
        `tls`: the peers' Thrift ports speak TLS (service/security/tls.py peer_tls)."""
        self.timeout_ms = (
            round(Config().forward_timeout_s * 1000) if timeout_ms is None else timeout_ms
        )
        self._tls = tls
        self._clock = clock
        # Per peer: (client, when it was returned), the freshest last.
        self._idle: dict[str, list[tuple[Any, float]]] = {}
        self._lock = threading.Lock()

    def _client(self, address: str) -> Any:
        stale: list[Any] = []
        fresh = None
        with self._lock:
            idle = self._idle.get(address, [])
            horizon = self._clock.monotonic() - _MAX_IDLE_S
            while idle and fresh is None:
                client, returned_at = idle.pop()
                if returned_at >= horizon:
                    fresh = client
                else:
                    stale.append(client)
        for client in stale:
            client.close()
        if fresh is not None:
            return fresh
        host, _, port = address.rpartition(":")
        return make_client(
            pinlater.PinLater,
            host,
            int(port),
            proto_factory=TCyBinaryProtocolFactory(),
            trans_factory=TCyFramedTransportFactory(),
            timeout=self.timeout_ms,
            ssl_context=self._tls,
        )

    def _return(self, address: str, client: Any) -> None:
        with self._lock:
            idle = self._idle.setdefault(address, [])
            if len(idle) < _IDLE_PER_PEER:
                idle.append((client, self._clock.monotonic()))
                return
        client.close()

    def dequeue(
        self, address: str, caller: Caller | None, request: DequeueRequest, limit: int
    ) -> Any:
        """dequeueOwned on a peer, for up to `limit` jobs of the request's queue."""
        context = (
            None
            if caller is None
            else pinlater.RequestContext(source=caller.source, requestId=caller.request_id)
        )
        forwarded = pinlater.PinLaterDequeueRequest(
            queueName=request.queue,
            limit=limit,
            dryRun=request.dry_run,
            coverage=request.coverage,
        )
        client = self._client(address)
        try:
            response = client.dequeueOwned(context, forwarded)
        except Exception:
            client.close()  # a broken connection must not go back to the pool
            raise
        self._return(address, client)
        return response

    def close(self) -> None:
        with self._lock:
            pools, self._idle = self._idle, {}
        for idle in pools.values():
            for client, _ in idle:
                client.close()
