"""`Worker`: runs a handler for every job of a queue, with retries, heartbeats and a
graceful shutdown.

    from pinledger.client import PinLaterClient
    from pinledger.client.job_context import JobContext
    from pinledger.client.retry import exponential
    from pinledger.client.worker import Worker, worker_source

    def send_email(job: JobContext) -> str | None:
        deliver(job.body)                  # raise to fail: the job is retried
        return "sent"                      # appended to the job's custom status

    with PinLaterClient("127.0.0.1:9010", source=worker_source("mailer")) as pl:
        Worker(pl, "emails", send_email, retry=exponential(1, cap_s=300)).run()

What the worker does with a job:

- It dequeues up to `batch_size` jobs at a time, when nothing it holds is waiting for a
  thread and a thread is free, and runs them on `concurrency` threads. It holds at
  most `concurrency - 1 + batch_size` claims; for jobs that run long, keep `batch_size`
  at or below `concurrency` so none waits behind another.
- A handler that returns succeeded (a returned string is appended to the job's custom
  status). A handler that raises failed: the failure ack carries the retry policy's
  delay and a line `attempt N failed: Type: message` for the custom status. Whether the
  job comes back is the job's attempt budget (see client.retry).
- Acks ride on the next dequeue call (one round trip for both). When there is nothing
  to dequeue for (every thread busy, or stopping) they go out with ackDequeuedJobs.
  A call that fails is logged and repeated with a growing pause: acks are safe to
  repeat, the ledger rejects one that already applied.
- Every `heartbeat_s` (default: a third of the claim timeout) one checkpointJobs call
  renews the claim of every job the worker holds, so a job may run longer than the
  server's claim timeout.
- An empty queue makes the worker wait, twice as long each time from `idle_backoff[0]`
  up to `idle_backoff[1]`; a dequeue that finds work resets the wait.
- `stop()`, SIGTERM or SIGINT (handlers installed when `run()` is called from the main
  thread) stop the dequeuing; jobs that have not started are released at once, running
  ones get `grace_s` to finish; the ones still running then are released too
  (checkpoint moveToPending: back to PENDING, due now, with no attempt used) and their
  result, should they finish later, is dropped. Every pending ack and release is sent
  before `run()` returns. A second signal skips what is left of the grace period.

Claims and the worker's identity: PinLater acks carry no claim, so the ledger accepts an
ack only from the `RequestContext.source` that claimed the job. Give each worker
process its own source (`worker_source(name)`: name:host:pid) so that one worker's late
ack can never land on another worker's claim of the same job.

The package, one module per responsibility: `loop` (the Worker: the dequeue loop, the
handler threads, the shutdown), `handler` (one run of the user's handler), `outcome`
(the pure function from a run to its ack, and the Outcome enum), `counters`, `outbox`
(pending acks and checkpoints, held claims, flushing), `heartbeat`, `signals`,
`options` (checks, and `worker_source`).
"""

from pinledger.client.job_context import JobContext
from pinledger.client.worker.counters import WorkerCounters
from pinledger.client.worker.handler import Handler
from pinledger.client.worker.loop import Worker
from pinledger.client.worker.options import worker_source

__all__ = ["Handler", "JobContext", "Worker", "WorkerCounters", "worker_source"]
