"""An example worker: makes thumbnails of images, failing now and then the way real jobs
do, so that retries and failed jobs show up.

    pinledger serve &              # a server on 127.0.0.1:9010
    python -m pinledger.client.examples.enqueue_jobs --jobs 50   # fill "thumbnails"
    python -m pinledger.client.examples.thumbnail_worker   # Ctrl-C stops it gracefully

A job's body is JSON: {"image": "photos/cat.jpg", "width": 128}. The handler is a plain
function of a JobContext; import it to run it in your own Worker:

    from pinledger.client.examples.thumbnail_worker import make_thumbnail
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import zlib

from pinledger.client import PinLaterClient, Worker, exponential, worker_source
from pinledger.client.job_context import JobContext

QUEUE = "thumbnails"
# One job in this many times out on its first attempt (a flaky image store)...
FLAKY_ONE_IN = 4
# ...and images whose name contains this never work (the job ends FAILED).
BROKEN_MARK = "corrupt"


class ImageStoreTimeoutError(Exception):
    """The (pretend) image store did not answer in time: worth a retry."""


class CorruptImageError(Exception):
    """The image cannot be decoded: every attempt fails the same way."""


def make_thumbnail(job: JobContext) -> str:
    """Make the thumbnail of the image named in the job's JSON body.

    Raises ImageStoreTimeoutError on the first attempt of about one job in four (the
    retry usually works) and CorruptImageError for images whose name contains "corrupt"
    (the job uses up its attempts and ends FAILED). Returns the line appended to the
    job's custom status on success.
    """
    request = json.loads(job.body)
    image, width = str(request["image"]), int(request.get("width", 128))
    if BROKEN_MARK in image:
        raise CorruptImageError(f"{image}: not a JPEG file (starts with 0x00 0x00)")
    # Which jobs are flaky depends only on the job, so a run is reproducible.
    if job.attempt == 1 and zlib.crc32(job.descriptor.encode()) % FLAKY_ONE_IN == 0:
        raise ImageStoreTimeoutError(f"image store did not answer for {image} within 2 s")
    time.sleep(0.01 * width / 128)  # the resizing
    return f"thumbnail {width}px of {image} written to thumbs/{width}/{image}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", default="127.0.0.1:9010", help="host:port, or a file")
    parser.add_argument("--queue", default=QUEUE)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument(
        "--claim-timeout", type=float, default=600, help="the server's claim timeout, s"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    with PinLaterClient(args.servers, source=worker_source("thumbnailer")) as client:
        worker = Worker(
            client,
            args.queue,
            make_thumbnail,
            concurrency=args.concurrency,
            batch_size=args.batch_size,
            # 0.5 s, 1 s, 2 s ... at most a minute, up to 20 % sooner so that jobs
            # that failed together do not come back together.
            retry=exponential(0.5, cap_s=60, jitter=0.2),
            claim_timeout_s=args.claim_timeout,
        )
        worker.run()  # until SIGTERM or Ctrl-C
    print(
        f"{worker.processed} runs: {worker.succeeded} succeeded, {worker.retried} failed "
        f"and were retried, {worker.failed} failed for good"
    )


if __name__ == "__main__":
    main()
