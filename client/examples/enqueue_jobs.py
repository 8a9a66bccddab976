"""Fill the example queue: thumbnail jobs with priorities, some delayed, a few that can
never succeed.

    python -m pinledger.client.examples.enqueue_jobs --jobs 50 --servers 127.0.0.1:9010
"""

from __future__ import annotations

import argparse
import json

from pinledger.client import Job, PinLaterClient, after_ms
from pinledger.client.examples.thumbnail_worker import BROKEN_MARK, QUEUE

SIZES = (64, 128, 256)


def thumbnail_jobs(count: int, *, delayed_s: float = 5.0) -> list[Job]:
    """`count` jobs: every tenth is urgent (priority 1), every fifth waits `delayed_s`,
    one in twenty-five is a corrupt image; three attempts each."""
    jobs = []
    for i in range(count):
        name = f"photos/{BROKEN_MARK if i % 25 == 24 else 'img'}-{i:04d}.jpg"
        body = json.dumps({"image": name, "width": SIZES[i % len(SIZES)]}).encode()
        jobs.append(
            Job(
                body,
                priority=1 if i % 10 == 0 else 2,
                run_after_ms=after_ms(delayed_s) if i % 5 == 4 else None,
                attempts_allowed=3,
            )
        )
    return jobs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="127.0.0.1:9010", help="host:port, or a file")
    parser.add_argument("--queue", default=QUEUE)
    parser.add_argument("--jobs", type=int, default=50)
    args = parser.parse_args(argv)
    with PinLaterClient(args.servers) as client:
        client.create_queue(args.queue)
        descriptors = client.enqueue(args.queue, thumbnail_jobs(args.jobs))
    print(f"enqueued {len(descriptors)} jobs into {args.queue!r}, e.g. {descriptors[0]}")
    print("now run: python -m pinledger.client.examples.thumbnail_worker")


if __name__ == "__main__":
    main()
