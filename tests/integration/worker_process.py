"""A worker process for the shutdown tests: `python -m tests.integration.worker_process
--port P --queue Q --journal FILE --tag T`.

Each job's body is `sleep:<seconds>` (or `fail`, which raises); the handler writes
`start <descriptor> <tag>` to the journal when it begins and `done <descriptor> <tag>`
just before it returns, so the test knows which handler runs completed where. On exit
the worker prints its counters as one JSON line.

With `--spans FILE` the process installs the OpenTelemetry SDK (a tracer provider can
be set once per process, hence a process of its own), the handler opens a span of its
own, `user work`, the worker stops after `--exit-after` handler runs and the finished
spans are written to FILE as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pinledger.client import PinLaterClient
from pinledger.client.job_context import JobContext
from pinledger.client.retry import constant
from pinledger.client.worker import Worker, worker_source


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
    parser.add_argument("--spans")
    parser.add_argument("--exit-after", type=int, default=0)
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

    exporter = InMemorySpanExporter()
    if args.spans:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("worker_process")

    def handler(job: JobContext) -> str:
        note("start", job.descriptor)
        with tracer.start_as_current_span("user work"):
            if job.body == b"fail":
                raise RuntimeError("asked to fail")
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
        if args.exit_after:
            threading.Thread(target=stop_after, args=(worker, args.exit_after), daemon=True).start()
        worker.run()
    print(json.dumps(dataclasses.asdict(worker.counters)), flush=True)
    if args.spans:
        Path(args.spans).write_text(
            json.dumps([span_dict(s) for s in exporter.get_finished_spans()])
        )


def stop_after(worker: Worker, runs: int) -> None:
    while worker.processed < runs:
        time.sleep(0.05)
    worker.stop()


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    context, parent = span.get_span_context(), span.parent
    assert context is not None
    return {
        "name": span.name,
        "trace_id": context.trace_id,
        "span_id": context.span_id,
        "parent_id": parent.span_id if parent else None,
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
    }


if __name__ == "__main__":
    main()
