"""A PinLater client in Python, on code that `thrift --gen py` generates from our IDL
and the official Apache `thrift` library (not thriftpy2, which the server uses):
framed transport + binary protocol. tests/integration/test_interop.py runs it.

Usage: python py_client.py <gen_py_dir> <host> <port> <queue> [<cafile> [<certfile> <keyfile>]]

With a CA file it connects over TLS (the library's TSSLSocket, the server's certificate
verified against that CA and its host name), presenting a client certificate if given.

Creates the queue (twice: idempotent; and an invalid name must raise PinLaterException
QUEUE_NAME_INVALID), enqueues 3 jobs, dequeues them, acks them as succeeded, looks them
up and prints one JSON object per job: descriptor, state, customStatus, body. Exit
status 0 on success; any exception prints its traceback and exits 1.

The generated code exists only in a temporary directory, so it (and the untyped
`thrift` library) is imported dynamically.
"""

from __future__ import annotations

import importlib
import json
import ssl
import sys
import time
import traceback
from typing import Any

STATUS = "done-by-python"
JOBS = 3
DEQUEUE_DEADLINE_S = 30.0
DEQUEUE_PAUSE_S = 0.2
SOCKET_TIMEOUT_MS = 30_000


def create_queue(client: Any, t: Any, ctx: Any, queue: str) -> None:
    client.createQueue(ctx, queue)
    client.createQueue(ctx, queue)  # idempotent
    # A declared exception crosses the wire as PinLaterException with its code.
    try:
        client.createQueue(ctx, "not a queue!")
    except t.PinLaterException as exc:
        if exc.errorCode != t.ErrorCode.QUEUE_NAME_INVALID:
            raise RuntimeError(f"createQueue('not a queue!') raised {exc!r}") from exc
    else:
        raise RuntimeError("createQueue accepted the name 'not a queue!'")


def dequeue_all(client: Any, t: Any, ctx: Any, queue: str, enqueued: dict[str, str]) -> None:
    """Dequeue until every enqueued job came back, with its body.

    The server may need a moment after createQueue before it serves the queue.
    """
    dequeued: dict[str, str] = {}
    deadline = time.monotonic() + DEQUEUE_DEADLINE_S
    while len(dequeued) < len(enqueued):
        got = client.dequeueJobs(ctx, t.PinLaterDequeueRequest(queueName=queue, limit=10))
        jobs: dict[str, bytes] = got.jobs or {}
        for descriptor, raw in jobs.items():
            body = raw.decode()
            if enqueued.get(descriptor) != body:
                raise RuntimeError(f"dequeued {descriptor} with body {body!r}, enqueued {enqueued}")
            dequeued[descriptor] = body
        if len(dequeued) < len(enqueued):
            if time.monotonic() > deadline:
                raise RuntimeError(f"after {DEQUEUE_DEADLINE_S} s dequeued only {sorted(dequeued)}")
            time.sleep(DEQUEUE_PAUSE_S)


def print_jobs(client: Any, t: Any, ctx: Any, descriptors: list[str]) -> None:
    request = t.PinLaterLookupJobRequest(jobDescriptors=descriptors, includeBody=True)
    infos: dict[str, Any] = client.lookupJobs(ctx, request)
    for descriptor in descriptors:
        info = infos.get(descriptor)
        if info is None:
            raise RuntimeError(f"lookupJobs left out {descriptor}: {infos}")
        line = {
            "descriptor": info.jobDescriptor,
            "state": t.PinLaterJobState._VALUES_TO_NAMES[info.jobState],
            "customStatus": info.customStatus,
            "body": None if info.body is None else info.body.decode(),
        }
        print(json.dumps(line), flush=True)


def open_socket(host: str, port: int, tls: list[str]) -> Any:
    if not tls:
        return importlib.import_module("thrift.transport.TSocket").TSocket(host, port)
    tssl = importlib.import_module("thrift.transport.TSSLSocket")
    cafile, *client = tls
    certificate = {"certfile": client[0], "keyfile": client[1]} if client else {}
    return tssl.TSSLSocket(host, port, cert_reqs=ssl.CERT_REQUIRED, ca_certs=cafile, **certificate)


def run(host: str, port: int, queue: str, tls: list[str]) -> None:
    ttransport = importlib.import_module("thrift.transport.TTransport")
    tbinary = importlib.import_module("thrift.protocol.TBinaryProtocol")
    service = importlib.import_module("pinlater.PinLater")
    t = importlib.import_module("pinlater.ttypes")

    sock = open_socket(host, port, tls)
    sock.setTimeout(SOCKET_TIMEOUT_MS)
    transport = ttransport.TFramedTransport(sock)
    client = service.Client(tbinary.TBinaryProtocol(transport))
    transport.open()
    try:
        ctx = t.RequestContext(source="interop-python:localhost", requestId="python-1")
        create_queue(client, t, ctx, queue)

        jobs = [t.PinLaterJob(body=f"python-{i}".encode(), priority=i) for i in range(1, JOBS + 1)]
        response = client.enqueueJobs(ctx, t.PinLaterEnqueueRequest(queueName=queue, jobs=jobs))
        descriptors: list[str] = list(response.jobDescriptors)
        if len(descriptors) != JOBS:
            raise RuntimeError(f"enqueue returned {descriptors}")
        dequeue_all(
            client, t, ctx, queue, {d: f"python-{i}" for i, d in enumerate(descriptors, start=1)}
        )

        acks = [
            t.PinLaterJobAckInfo(jobDescriptor=d, appendCustomStatus=STATUS) for d in descriptors
        ]
        client.ackDequeuedJobs(ctx, t.PinLaterJobAckRequest(queueName=queue, jobsSucceeded=acks))
        print_jobs(client, t, ctx, descriptors)
    finally:
        transport.close()


def main(argv: list[str]) -> int:
    if len(argv) not in (5, 6, 8):
        print(
            "usage: python py_client.py <gen_py_dir> <host> <port> <queue> "
            "[<cafile> [<certfile> <keyfile>]]",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, argv[1])
    try:
        run(argv[2], int(argv[3]), argv[4], argv[5:])
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
