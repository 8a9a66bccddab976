"""The Kafka client A/B behind docs/decisions/0021-librdkafka-adapter.md: the Log
adapter on kafka-python against the one on librdkafka, both through the port
(`ledger.adapters.open_log`), on the same broker and the same topic shape.

    python -m bench.log_clients [--seconds 5] [--rounds 3] [--threads 8]

`threads` threads each append one record of `bytes` bytes at a time and wait for its
acknowledgement (acks=all, idempotent, linger 0: the adapters' settings), spread over
a topic of `partitions` partitions, as concurrent enqueues do. Rounds alternate the
clients (A B A B ...), each on a log and a topic of its own, after a warm-up that is
not counted. Per round: appends per second, and the process's CPU per append
(getrusage: every thread of this process, librdkafka's C threads included, less
nothing: the appending loop itself costs the same under both clients).

On a shared machine the other load shifts both figures: the load average is printed
before the first round; compare rounds of the same run only.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import threading
import time
import uuid
from dataclasses import dataclass

from pinledger.ledger.adapters import CLIENTS, open_log
from pinledger.ledger.kafka import KafkaSettings
from pinledger.ledger.log import Append, queue_topic
from pinledger.service.config import Config

_WARM_UP_S = 1.0


@dataclass(frozen=True, slots=True)
class Round:
    client: str
    appends: int
    seconds: float
    cpu_s: float

    @property
    def per_second(self) -> float:
        return self.appends / self.seconds

    @property
    def cpu_us_per_append(self) -> float:
        return self.cpu_s / max(1, self.appends) * 1e6


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_round(client: str, args: argparse.Namespace, bootstrap: str) -> Round:
    log = open_log(KafkaSettings(bootstrap=bootstrap, client_id=f"bench-{client}"), client)
    topic = queue_topic(f"bench{uuid.uuid4().hex[:8]}.", "clients")
    try:
        log.create_topic(topic, args.partitions)
        value = os.urandom(args.bytes)
        counts = [0] * args.threads
        stop = threading.Event()

        def append(index: int) -> None:
            partition = index % args.partitions
            while not stop.is_set():
                log.append([Append(topic, partition, value)])
                counts[index] += 1

        threads = [
            threading.Thread(target=append, args=(i,), daemon=True) for i in range(args.threads)
        ]
        for thread in threads:
            thread.start()
        time.sleep(_WARM_UP_S)
        count0, cpu0, t0 = sum(counts), _cpu_s(), time.monotonic()
        time.sleep(args.seconds)
        count1, cpu1, t1 = sum(counts), _cpu_s(), time.monotonic()
        stop.set()
        for thread in threads:
            thread.join()
        return Round(client, count1 - count0, t1 - t0, cpu1 - cpu0)
    finally:
        log.delete_topic(topic)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per client")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bytes", type=int, default=100, help="record size")
    parser.add_argument("--kafka", default=Config.from_env().kafka)
    args = parser.parse_args()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{args.threads} threads, one {args.bytes}-byte record per append, "
        f"{args.partitions} partitions, {args.seconds:g} s per round; load {load}"
    )
    print(f"{'round':>5}  {'client':<13} {'appends/s':>10} {'CPU µs/append':>14}")
    rounds: list[Round] = []
    for number in range(1, args.rounds + 1):
        for client in CLIENTS:
            done = run_round(client, args, args.kafka)
            rounds.append(done)
            print(
                f"{number:>5}  {client:<13} {done.per_second:>10,.0f} "
                f"{done.cpu_us_per_append:>14,.0f}",
                flush=True,
            )
    for client in CLIENTS:
        mine = [r for r in rounds if r.client == client]
        rates = [r.per_second for r in mine]
        costs = [r.cpu_us_per_append for r in mine]
        print(
            f"{client}: median {statistics.median(rates):,.0f} appends/s "
            f"({min(rates):,.0f}-{max(rates):,.0f}), "
            f"{statistics.median(costs):,.0f} CPU µs/append ({min(costs):,.0f}-{max(costs):,.0f})"
        )


if __name__ == "__main__":
    main()
