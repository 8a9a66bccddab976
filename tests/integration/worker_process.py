"""A worker process for the shutdown tests: `python -m tests.integration.worker_process
--port P --queue Q --journal FILE --tag T`.

Each job's body is `sleep:<seconds>`; the handler writes `start <descriptor> <tag>` to
the journal when it begins and `done <descriptor> <tag>` just before it returns, so the
test knows which handler runs completed where. On exit the worker prints its counters
as one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import time

from client import PinLaterClient
from client.retry import constant
from client.worker import JobContext, Worker, worker_source


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=6)
    parser.add_argument("--grace", type=float, default=5.0)
    parser.add_argument("--max-sleep", type=float, default=3600.0)
    parser.add_argument("--claim-timeout", type=float, default=600.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(threadName)s %(message)s")

    def note(what: str, descriptor: str) -> None:
        # One write of one line to a file opened for appending: lines never interleave.
        line = f"{what} {descriptor} {args.tag}\n".encode()
        fd = os.open(args.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def handler(job: JobContext) -> str:
        note("start", job.descriptor)
        seconds = float(job.body.decode().removeprefix("sleep:"))
        time.sleep(min(seconds, args.max_sleep))
        note("done", job.descriptor)
        return f"done by {args.tag}"

    with PinLaterClient(f"127.0.0.1:{args.port}", source=worker_source(args.tag)) as client:
        worker = Worker(
            client,
            args.queue,
            handler,
            concurrency=args.concurrency,
            batch_size=args.batch_size,
            retry=constant(0),
            grace_s=args.grace,
            claim_timeout_s=args.claim_timeout,
            idle_backoff=(0.05, 0.5),
        )
        worker.run()
    print(json.dumps(dataclasses.asdict(worker.counters)), flush=True)


if __name__ == "__main__":
    main()
