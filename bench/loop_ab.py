"""Issue 44, lever 1, before building it: what one event loop for the connections would
save against a thread per connection, with everything else held equal.

Both servers do the same minimal one-job enqueue: read a frame, decode `enqueueJobs`
with thriftpy2's Cython protocol, append one record to Kafka with librdkafka (acks=all,
idempotent, linger 0: the adapter's settings), wait for its delivery report, answer the
descriptor. No ledger, no owner, no Postgres: what differs is only how a call waits.

- `threads`: a thread per connection, as service/api/connections.py; the caller waits
  on an Event that the producer's poll thread sets (ledger/rdkafka/producer.py).
- `asyncio` / `uvloop`: every connection on one event loop thread; the poll thread
  hands each delivery report to the loop (`call_soon_threadsafe`).

    python -m bench.loop_ab --modes threads,asyncio,uvloop --rounds 3

Prints, per mode and round, the server process's CPU per call (all threads, /proc) and
its context switches per call, then the medians. Needs the stack's Kafka
(PINLEDGER_KAFKA).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvloop
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from thriftpy2.protocol.cybin import TCyBinaryProtocol  # type: ignore[attr-defined]
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TCyMemoryBuffer

from bench.pinledger_load import BODY, context
from pinledger.idl import pinlater
from pinledger.service.testing.servers import connect, free_port, wait_listening

_SERVICE = pinlater.PinLater
_LEN = struct.Struct("!i")


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "socket.nagle.disable": True,
        }
    )


def _decode(frame: bytes) -> tuple[str, int, Any]:
    proto = TCyBinaryProtocol(TCyMemoryBuffer(frame))
    name, _, seqid = proto.read_message_begin()
    args = _SERVICE.enqueueJobs_args()
    proto.read_struct(args)
    proto.read_message_end()
    return name, seqid, args


def _encode(name: str, seqid: int, descriptors: list[str]) -> bytes:
    buf = TCyMemoryBuffer()
    proto = TCyBinaryProtocol(buf)
    proto.write_message_begin(name, TMessageType.REPLY, seqid)
    result = _SERVICE.enqueueJobs_result(
        success=pinlater.PinLaterEnqueueResponse(jobDescriptors=descriptors)
    )
    proto.write_struct(result)
    proto.write_message_end()
    proto.trans.flush()
    body: bytes = buf.getvalue()
    return _LEN.pack(len(body)) + body


def _record(args: Any) -> bytes:
    return b"".join(job.body for job in args.request.jobs)


class _Polling:
    """The producer's poll thread, as the adapter's."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        threading.Thread(target=self._poll, daemon=True, name="rdkafka-poll").start()

    def _poll(self) -> None:
        while True:
            self.producer.poll(0.1)


def serve_threads(port: int, topic: str, bootstrap: str) -> None:
    producer = _producer(bootstrap)
    _Polling(producer)
    listener = socket.create_server(("127.0.0.1", port), backlog=128)

    def read_exact(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def serve(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        partition = 0
        try:
            while True:
                (size,) = _LEN.unpack(read_exact(conn, 4))
                name, seqid, args = _decode(read_exact(conn, size))
                done = threading.Event()
                where: list[int] = []

                def report(
                    err: Any, msg: Any, done: threading.Event = done, where: list[int] = where
                ) -> None:
                    where.append(msg.offset())
                    done.set()

                producer.produce(topic, _record(args), partition=partition % 4, on_delivery=report)
                partition += 1
                done.wait(10)
                conn.sendall(_encode(name, seqid, [f"{topic}:{where[0]}"]))
        except (EOFError, OSError):
            conn.close()

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def serve_loop(port: int, topic: str, bootstrap: str, use_uvloop: bool) -> None:
    producer = _producer(bootstrap)
    _Polling(producer)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        partition = 0
        try:
            while True:
                (size,) = _LEN.unpack(await reader.readexactly(4))
                name, seqid, args = _decode(await reader.readexactly(size))
                future: asyncio.Future[int] = loop.create_future()

                def report(err: Any, msg: Any, future: asyncio.Future[int] = future) -> None:
                    loop.call_soon_threadsafe(future.set_result, msg.offset())

                producer.produce(topic, _record(args), partition=partition % 4, on_delivery=report)
                partition += 1
                offset = await future
                writer.write(_encode(name, seqid, [f"{topic}:{offset}"]))
        except (asyncio.IncompleteReadError, OSError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=128)
        async with server:
            await server.serve_forever()

    if use_uvloop:
        uvloop.run(main())
    else:
        asyncio.run(main())


def _cpu_and_switches(pid: int) -> tuple[float, int]:
    ticks = os.sysconf("SC_CLK_TCK")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches += int(line.split()[1])
        except FileNotFoundError:
            pass
    return cpu, switches


def _load(port: int, threads: int, calls: int) -> float:
    per = calls // threads
    clients = [connect(port) for _ in range(threads)]
    request = pinlater.PinLaterEnqueueRequest(queueName="q", jobs=[pinlater.PinLaterJob(body=BODY)])
    barrier = threading.Barrier(threads + 1)

    def work(client: Any) -> None:
        barrier.wait()
        for _ in range(per):
            answer = client.enqueueJobs(context(), request)
            if len(answer.jobDescriptors) != 1:
                raise RuntimeError(f"answered {answer!r} to a one-job enqueue")

    runners = [threading.Thread(target=work, args=(c,)) for c in clients]
    for runner in runners:
        runner.start()
    barrier.wait()
    started = time.perf_counter()
    for runner in runners:
        runner.join()
    for client in clients:
        client.close()
    return time.perf_counter() - started


def measure(mode: str, bootstrap: str, topic: str, threads: int, calls: int) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.loop_ab",
            "--serve",
            mode,
            "--port",
            str(port),
            "--topic",
            topic,
        ],
        env={**os.environ, "PINLEDGER_KAFKA": bootstrap},
    )
    try:
        wait_listening(port)
        _load(port, threads, min(calls // 5, 1000))  # warm-up
        cpu0, sw0 = _cpu_and_switches(server.pid)
        seconds = _load(port, threads, calls)
        cpu1, sw1 = _cpu_and_switches(server.pid)
    finally:
        server.kill()
        server.wait()
    done = calls // threads * threads
    return {
        "cpu_us": 1e6 * (cpu1 - cpu0) / done,
        "switches": (sw1 - sw0) / done,
        "rate": done / seconds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loop_ab", description=__doc__)
    parser.add_argument("--modes", default="threads,asyncio,uvloop")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    bootstrap = os.environ.get("PINLEDGER_KAFKA", "127.0.0.1:19092")
    if args.serve:
        servers: dict[str, Callable[[], None]] = {
            "threads": lambda: serve_threads(args.port, args.topic, bootstrap),
            "asyncio": lambda: serve_loop(args.port, args.topic, bootstrap, False),
            "uvloop": lambda: serve_loop(args.port, args.topic, bootstrap, True),
        }
        servers[args.serve]()
        return
    topic = f"loop_ab_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result()
    print(f"topic {topic} (deleted at the end)", file=sys.stderr, flush=True)
    modes = args.modes.split(",")
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    try:
        for round_ in range(args.rounds):
            # Each mode first in turn: a machine that warms up favours whoever runs last.
            order = modes[round_ % len(modes) :] + modes[: round_ % len(modes)]
            for mode in order:
                got = measure(mode, bootstrap, topic, args.concurrency, args.calls)
                results[mode].append(got)
                print(
                    f"round {round_ + 1} {mode:8} {got['cpu_us']:7.1f} us CPU/call "
                    f"{got['switches']:5.2f} switches/call {got['rate']:7.0f} calls/s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        admin.delete_topics([topic])[topic].result()
    print(f"{'mode':8}  {'CPU us/call':>11}  {'switches/call':>13}  {'calls/s':>8}  (medians)")
    for mode, runs in results.items():
        print(
            f"{mode:8}  {statistics.median(r['cpu_us'] for r in runs):11.1f}  "
            f"{statistics.median(r['switches'] for r in runs):13.2f}  "
            f"{statistics.median(r['rate'] for r in runs):8.0f}"
        )


if __name__ == "__main__":
    main()
