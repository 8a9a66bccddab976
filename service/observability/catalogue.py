"""The metrics catalogue: every metric a pinledger server exports, as data.

One `MetricSpec` per metric (its name, type, labels, unit and help). The registry
(metrics.py) refuses a name not listed here, or one recorded with other labels or as
another type, and writes each family's `# HELP` and `# TYPE` lines from it; the manual's
metrics reference (docs/reference/metrics.md) is generated from it (`reference_page`,
docs/generate.py). The help is written for an operator: what the number means, which
server exports it and how to add it up across servers (each series of a cluster-wide
number is exported by one server or by every server, as its help says), and what to do
when it looks wrong.

Cardinality: no label takes a value per job, claim or caller. The widest series sets are
per queue and partition (`topic`, `partition`), per queue and state, and per RPC method
and error code; everything else is per queue or smaller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: `kind` is its Prometheus type; `labels` the label names every series
    of it carries, no more, no fewer; `unit` what its value counts ("" for a plain
    number such as a 0/1 state or a ratio)."""

    name: str
    kind: Kind
    labels: tuple[str, ...]
    unit: str
    help: str

    @property
    def label_key(self) -> tuple[str, ...]:
        """The label names in the order a series' labels are kept (sorted)."""
        return tuple(sorted(self.labels))


def _spec(name: str, kind: Kind, labels: tuple[str, ...], unit: str, *help: str) -> MetricSpec:
    return MetricSpec(name, kind, labels, unit, " ".join(help))


# The metrics' names, one constant each: code records a metric by its constant, so a
# misspelt name fails the type check, not a scrape (test_metrics_catalogue.py).
RPC_TOTAL: Final = "pinledger_rpc_total"
RPC_ERRORS_TOTAL: Final = "pinledger_rpc_errors_total"
RPC_SECONDS: Final = "pinledger_rpc_seconds"
CONNECTIONS_OPEN: Final = "pinledger_connections_open"
CONNECTIONS_CLOSED_TOTAL: Final = "pinledger_connections_closed_total"
JOBS_TOTAL: Final = "pinledger_jobs_total"
DEQUEUE_DELAY_SECONDS: Final = "pinledger_dequeue_delay_seconds"
DEQUEUE_CALLS_TOTAL: Final = "pinledger_dequeue_calls_total"
FORWARDED_DEQUEUES_TOTAL: Final = "pinledger_forwarded_dequeues_total"
FORWARDED_JOBS_TOTAL: Final = "pinledger_forwarded_jobs_total"
FORWARD_SECONDS: Final = "pinledger_forward_seconds"
LEDGER_JOBS_TOTAL: Final = "pinledger_ledger_jobs_total"
LEDGER_REJECTED_TOTAL: Final = "pinledger_ledger_rejected_total"
LEDGER_QUEUE_WAIT_SECONDS: Final = "pinledger_ledger_queue_wait_seconds"
LEDGER_RUN_SECONDS: Final = "pinledger_ledger_run_seconds"
QUEUE_JOBS: Final = "pinledger_queue_jobs"
QUEUE_OLDEST_READY_SECONDS: Final = "pinledger_queue_oldest_ready_seconds"
QUEUE_PARTITIONS: Final = "pinledger_queue_partitions"
QUEUE_EMPTY_DEQUEUE_RATIO: Final = "pinledger_queue_empty_dequeue_ratio"
QUEUE_PAUSED: Final = "pinledger_queue_paused"
SCHEDULE_TICKS: Final = "pinledger_schedule_ticks_total"
SCHEDULE_TICKS_MISSED: Final = "pinledger_schedule_ticks_missed_total"
OWNED_PARTITIONS: Final = "pinledger_owned_partitions"
UNOWNED_PARTITIONS: Final = "pinledger_unowned_partitions"
GROUP_REBALANCES_TOTAL: Final = "pinledger_group_rebalances_total"
PARTITION_HANDOFFS_TOTAL: Final = "pinledger_partition_handoffs_total"
PARTITION_HANDOFF_SECONDS: Final = "pinledger_partition_handoff_seconds"
PEERS_REMOVED_TOTAL: Final = "pinledger_peers_removed_total"
OWNER_LEASE_LAPSES_TOTAL: Final = "pinledger_owner_lease_lapses_total"
PROJECTION_LAG_RECORDS: Final = "pinledger_projection_lag_records"
PROJECTION_LAG_SECONDS: Final = "pinledger_projection_lag_seconds"
PARTITION_PAUSED: Final = "pinledger_partition_paused"
READY_JOBS_HELD: Final = "pinledger_ready_jobs_held"
LOG_APPEND_SECONDS: Final = "pinledger_log_append_seconds"
DEPENDENCY_UP: Final = "pinledger_dependency_up"
LOOP_LAG_SECONDS: Final = "pinledger_loop_lag_seconds"
LEDGER_FORMAT: Final = "pinledger_ledger_format"
LEDGER_FORMAT_NEWEST_READ: Final = "pinledger_ledger_format_newest_read"
LIVE_TRACES_TOTAL: Final = "pinledger_live_traces_total"
TRACE_SPANS_DROPPED_TOTAL: Final = "pinledger_trace_spans_dropped_total"


CATALOGUE: tuple[MetricSpec, ...] = (
    # -- the Thrift API ---------------------------------------------------------------
    _spec(
        RPC_TOTAL,
        "counter",
        ("method",),
        "calls",
        "Thrift calls this server received, by PinLater method (enqueueJobs, dequeueJobs,",
        "ackDequeuedJobs, ...; dequeueOwned is a dequeue another server forwarded here),",
        "failed ones included. Sum over servers for the cluster's call rate.",
    ),
    _spec(
        RPC_ERRORS_TOTAL,
        "counter",
        ("method", "code"),
        "calls",
        "Calls that ended in an error, by method and code: a PinLater ErrorCode number",
        "(413 no such queue, 429 rate limited, 502 a dependency down), the refusal's name",
        "for a request pinledger refused (ENQUEUE_REJECTED, ...), descriptor or regex for",
        "a malformed argument, behind when a read waited in vain for the projection,",
        "shard when Kafka or the store did not answer (the client may retry), internal",
        "for a bug (logged with its stack). A rise in shard or behind: check",
        "pinledger_dependency_up and the projection lag.",
    ),
    _spec(
        RPC_SECONDS,
        "histogram",
        ("method",),
        "seconds",
        "How long each call took on this server, from its arrival to its answer, failed",
        "calls included. dequeueJobs includes its claim's append to Kafka and any",
        "forward to a peer.",
    ),
    _spec(
        CONNECTIONS_OPEN,
        "gauge",
        (),
        "connections",
        "Thrift connections this server serves now (clients' connections; a peer's",
        "forwarded dequeues on a separate peer port are not counted). Each is a thread;",
        "PINLEDGER_MAX_CONNECTIONS caps them and refuses the rest.",
    ),
    _spec(
        CONNECTIONS_CLOSED_TOTAL,
        "counter",
        ("reason",),
        "connections",
        "Thrift connections closed, by reason: client (the client closed it), idle (idle",
        "for PINLEDGER_IDLE_TIMEOUT_S), oversized (a frame over PINLEDGER_MAX_FRAME_BYTES),",
        "garbage (not a PinLater call), tls (the TLS handshake failed), refused (over",
        "PINLEDGER_MAX_CONNECTIONS), stopping (the server was stopping: closed after its",
        "call was answered). Anything but client, idle and stopping means a misconfigured",
        "or hostile client: the server log names its address.",
    ),
    # -- jobs, as callers asked ---------------------------------------------------------
    _spec(
        JOBS_TOTAL,
        "counter",
        ("queue", "action"),
        "jobs",
        "Jobs by what a call or the owner did to them, counted by the server that appended",
        "it: enqueue, dequeue (claimed for a worker), ack_success, ack_failure, checkpoint,",
        "retry and delete (bulk retryFailedJobs / deleteJobs and the dashboard's actions),",
        "timeout (a claim not renewed within PINLEDGER_CLAIM_TIMEOUT_S, appended by the",
        "partition's owner), gc (finished jobs past their TTL, removed by the owner). These",
        "are requests; pinledger_ledger_jobs_total says what the state machine made of",
        "them. Sum over servers.",
    ),
    _spec(
        DEQUEUE_DELAY_SECONDS,
        "histogram",
        ("queue",),
        "seconds",
        "How long each job claimed by this server's dequeues had been due (its run_after)",
        "when it was claimed: the wait a worker would have cut by polling more. Observed",
        "by the owner that claimed it.",
    ),
    _spec(
        DEQUEUE_CALLS_TOTAL,
        "counter",
        ("queue", "answer"),
        "calls",
        "dequeueJobs calls this server answered, by answer: jobs (at least one job) or",
        "empty. A queue with mostly empty answers has more workers polling than work",
        "(the adaptive partitions shrink on it). Sum over servers.",
    ),
    _spec(
        FORWARDED_DEQUEUES_TOTAL,
        "counter",
        ("outcome",),
        "calls",
        "Dequeues this server forwarded to another owner of the queue's partitions",
        "because its own had too few due jobs, by outcome: jobs, empty, failed (the peer",
        "did not answer in time, or froze and left the owners' group: see this server's",
        "log), quiet (not asked, it had nothing a moment ago; PINLEDGER_FORWARD_QUIET_MS).",
        "Many failed: a peer is down or overloaded.",
    ),
    _spec(
        FORWARDED_JOBS_TOTAL,
        "counter",
        (),
        "jobs",
        "Jobs peers returned to this server's forwarded dequeues.",
    ),
    _spec(
        FORWARD_SECONDS,
        "histogram",
        (),
        "seconds",
        "One forwarded dequeue's round trip to a peer (dequeueOwned), answered or not.",
    ),
    # -- the ledger: what the state machine applied ------------------------------------
    _spec(
        LEDGER_JOBS_TOTAL,
        "counter",
        ("queue", "outcome"),
        "jobs",
        "Events the state machine applied, by outcome, counted once by the owner of the",
        "job's partition after it committed them: enqueued, claimed, succeeded, failed",
        "(the job ended FAILED, by an ack or a timeout on its last attempt), retried (back",
        "to PENDING after a failure ack or a timeout with attempts left, or by",
        "retryFailedJobs), timed_out, checkpointed, released (a checkpoint moving the job",
        "back to PENDING), deleted, collected. Sum over servers: each partition has one",
        "owner at a time.",
    ),
    _spec(
        LEDGER_REJECTED_TOTAL,
        "counter",
        ("queue", "action"),
        "events",
        "Events the state machine rejected, by event type (Succeeded, Failed, Claimed,",
        "TimedOut, Checkpointed, ...): an ack or checkpoint for a claim that is no longer",
        "the job's (it timed out and went to another worker), a timeout a heartbeat",
        "overtook. The job's history records each. A steady rate of rejected acks means",
        "workers run jobs longer than PINLEDGER_CLAIM_TIMEOUT_S without checkpointing.",
    ),
    _spec(
        LEDGER_QUEUE_WAIT_SECONDS,
        "histogram",
        ("queue",),
        "seconds",
        "From a job's run_after (when it became due) to its claim, as the owner applied",
        "the claim: how long due jobs wait for a worker, cluster-wide when summed over",
        "servers.",
    ),
    _spec(
        LEDGER_RUN_SECONDS,
        "histogram",
        ("queue", "outcome"),
        "seconds",
        "From a job's claim to the end of that attempt, by how it ended: succeeded,",
        "failed, retried, timed_out, released, deleted. Observed by the owner that applied",
        "both the claim and the end (an attempt claimed before a partition changed owners",
        "is not observed).",
    ),
    # -- queues: cluster-wide numbers -------------------------------------------------
    _spec(
        QUEUE_JOBS,
        "gauge",
        ("queue", "state"),
        "jobs",
        "Each queue's jobs by state, as the dashboard's overview counts them: pending",
        "(PENDING and due now), later (PENDING, run_after in the future), running",
        "(IN_PROGRESS), succeeded, failed. Each count stops at PINLEDGER_QUEUE_METRICS_CAP",
        "(10,000 by default): a value at the cap means at least that many, so the cost",
        "stays a few short index ranges per queue however deep the backlog. Cluster-wide,",
        "read from the projection every PINLEDGER_QUEUE_METRICS_INTERVAL_S by the one",
        "server owning the catalog partition (a failover moves it): aggregate with max,",
        "not sum. A queue whose store does not answer has no series until it does.",
    ),
    _spec(
        QUEUE_OLDEST_READY_SECONDS,
        "gauge",
        ("queue",),
        "seconds",
        "How long the queue's oldest due PENDING job has waited since its run_after (now",
        "minus the smallest run_after of the jobs due now), 0 when none is due: the",
        "backlog's age, what workers are short of. Exported with pinledger_queue_jobs, by",
        "the catalog's owner: aggregate with max. Growing steadily: add workers, or look",
        "for a paused partition or a rate limit (maxJobsPerSecond) holding the queue.",
    ),
    _spec(
        QUEUE_PARTITIONS,
        "gauge",
        ("queue", "state"),
        "partitions",
        "Each queue's partitions by state, as the catalog has them: serving (take new",
        "jobs), draining (closed by a resize, still holding jobs), retired (drained and",
        "empty). Every server exports the same numbers: aggregate with max.",
    ),
    _spec(
        QUEUE_EMPTY_DEQUEUE_RATIO,
        "gauge",
        ("queue",),
        "",
        "For a queue with adaptive partitions: the share of this server's dequeue answers",
        "that were empty in the last measuring window (0 to 1), what the shrink decision",
        "reads; set at the end of each window that had calls.",
    ),
    _spec(
        SCHEDULE_TICKS,
        "counter",
        ("queue", "schedule"),
        "ticks",
        "Ticks of periodic jobs (`schedules` in the queue config) enqueued, counted by the",
        "server that held the schedules duty (the catalog's owner). Sum over servers; a",
        "schedule whose rate falls below its period's is not running: see the schedules",
        "duty's health and pinledger_schedule_ticks_missed_total.",
    ),
    _spec(
        SCHEDULE_TICKS_MISSED,
        "counter",
        ("queue", "schedule"),
        "ticks",
        "Ticks of periodic jobs that were due while no server ran the schedules duty and",
        "will not run: the latest due tick runs once, the ones before it are counted here",
        "(docs/guides/periodic-jobs.md). Any increase means the duty was down for longer",
        "than the schedule's period.",
    ),
    _spec(
        QUEUE_PAUSED,
        "gauge",
        ("queue",),
        "",
        "1 while the queue is paused from the catalog (`pinledger queue pause`, the",
        "dashboard): dequeues hand out none of its jobs, enqueues go on; 0 otherwise. Every",
        "server exports it once it has read the catalog: aggregate with max (min across",
        "servers at 0 while max is 1: a server has not read the pause yet).",
    ),
    # -- ownership and projection ------------------------------------------------------
    _spec(
        OWNED_PARTITIONS,
        "gauge",
        (),
        "partitions",
        "Queue partitions this server owns (projects and serves). Summed over servers it",
        "is every queue partition, each owned once; a server at 0 for long with others",
        "at many is not getting a share (check its log for the owners' group).",
    ),
    _spec(
        GROUP_REBALANCES_TOTAL,
        "counter",
        (),
        "events",
        "Assignments this server received from the owners' group: one when it joins, one",
        "per rebalance after (a server joined, left, died or was removed, or partitions",
        "were added). A steady cluster adds none; a count that keeps rising means servers",
        "keep dropping out of the group (their logs say why).",
    ),
    _spec(
        PARTITION_HANDOFFS_TOTAL,
        "counter",
        (),
        "partitions",
        "Partitions this server took over: assigned to it when it did not own them (at",
        "its start, or from a server that left or died). Sum over servers: every move of",
        "a partition between servers, counted once.",
    ),
    _spec(
        PARTITION_HANDOFF_SECONDS,
        "histogram",
        (),
        "seconds",
        "For each partition this server took over: from its assignment to serving (its",
        "ready window read and its log projected up to the end it had at assignment).",
        "What a worker waits, on top of the time the group took to notice (docs/decisions/",
        "0039-failover.md).",
    ),
    _spec(
        PEERS_REMOVED_TOTAL,
        "counter",
        (),
        "events",
        "Servers this one removed from the owners' group because their process was gone",
        "(their liveness port refused connections), so that their partitions moved at",
        "once rather than at the session timeout. Several servers may remove the same",
        "one: sum over servers counts removals, not deaths.",
    ),
    _spec(
        OWNER_LEASE_LAPSES_TOTAL,
        "counter",
        (),
        "events",
        "Times this server stopped handing out jobs because the owners' group had not",
        "confirmed its membership for half the session timeout (a stall: frozen process,",
        "Kafka unreachable): another server may own its partitions by then, so none of",
        "its claims is handed out until the group answers again. Should stay 0.",
    ),
    _spec(
        UNOWNED_PARTITIONS,
        "gauge",
        (),
        "partitions",
        "Partitions no live server owns: the partitions of the queues the catalog lists",
        "whose topic exists, plus the catalog's own, minus those assigned to a member of",
        "the owners' group, as this server reads the group every 2 s. Jobs in an unowned",
        "partition are neither projected nor served. A rebalance makes it non-zero for a",
        "few seconds; for longer, servers are down or cannot join the group (every server",
        "exports the same number: aggregate with max).",
    ),
    _spec(
        PROJECTION_LAG_RECORDS,
        "gauge",
        ("topic", "partition"),
        "records",
        "Records of an owned partition (and of the catalog topic, when this server owns",
        "it) that its projection has not committed yet: the log's end offset minus the",
        "projected offset, read every 2 s. A paused partition counts from the record it",
        "is paused at. Exported by the partition's owner only; a partition it no longer",
        "owns loses its series. Growing: the owner cannot keep up (store slow, see",
        "pinledger_loop_lag_seconds) or is stuck (pinledger_partition_paused).",
    ),
    _spec(
        PROJECTION_LAG_SECONDS,
        "gauge",
        ("queue",),
        "seconds",
        "How long the oldest record of the queue's partitions owned by this server has",
        "been in the log without being projected (the worst of its partitions), 0 when",
        "they are caught up. Measured against the log end read every 2 s: the first read",
        "that saw the record, so it is at least this old and at most about 2 s older.",
        "Reads (lookups, counts, the dashboard) show the jobs as of this long ago; a",
        "dequeue cannot see a job until it is projected. Aggregate with max over servers.",
    ),
    _spec(
        PARTITION_PAUSED,
        "gauge",
        ("queue", "partition"),
        "",
        "1 while an owned partition is paused at a record its store refuses or no release",
        "decodes (decision 0032): the partition's jobs are not served; /ready names it,",
        "with the offset and the `pinledger skip-record` command; 0 once it resumes.",
    ),
    _spec(
        READY_JOBS_HELD,
        "gauge",
        (),
        "jobs",
        "Due jobs this server holds in memory across its owned partitions' ready windows,",
        "what dequeues answer from (at most PINLEDGER_READY_WINDOW per partition).",
    ),
    _spec(
        LOG_APPEND_SECONDS,
        "histogram",
        (),
        "seconds",
        "How long each append to Kafka took, from the call to the brokers' acknowledgement",
        "(acks=all) or the failure, on either Kafka client: one per group-commit round",
        "trip (enqueues, claims, acks, maintenance) and per catalog record. Its p99 is",
        "the floor under enqueue and dequeue latency; a rise points at the brokers or the",
        "network (check the in-sync replicas).",
    ),
    # -- the server itself ---------------------------------------------------------------
    _spec(
        DEPENDENCY_UP,
        "gauge",
        ("dependency",),
        "",
        "1 when the dependency answered this server's last probe (every 2 s), else 0:",
        "kafka, and the store by its kind (postgres, mysql) or each store shard",
        "(postgres:a, ...). While one is down /ready fails and calls needing it fail with",
        "SHARD_CONNECTION_FAILED; /ready shows its error.",
    ),
    _spec(
        LOOP_LAG_SECONDS,
        "gauge",
        ("loop",),
        "seconds",
        "Seconds since a background loop of this server last turned: owner (polls Kafka,",
        "projects, runs maintenance), members (the owners' group, the watchdog),",
        "queue-directory (the catalog's queues). Over 60 s fails /health, and the",
        "process should be restarted; the log shows where the owner loop is stuck.",
    ),
    _spec(
        LEDGER_FORMAT,
        "gauge",
        (),
        "",
        "The cluster's ledger format (the record layout it writes) as this server follows",
        "it, from the catalog. During a rolling upgrade every server must read it before",
        "`pinledger upgrade-format` raises it.",
    ),
    _spec(
        LEDGER_FORMAT_NEWEST_READ,
        "gauge",
        (),
        "",
        "The newest ledger format this server's release reads. A server whose value is",
        "below the cluster's pinledger_ledger_format stops itself; raise the format only",
        "when every server's value is at least the target.",
    ),
    _spec(
        LIVE_TRACES_TOTAL,
        "counter",
        ("outcome",),
        "jobs",
        "Traced jobs whose ended attempts this server exported as spans (only while",
        "OpenTelemetry tracing is on), by outcome: exported, dropped (over",
        "PINLEDGER_TRACE_QUEUE waiting: the exporter is behind), no_history (the",
        "timeline rows were gone), gave_up (the history could not be read in 5 tries).",
        "dropped or gave_up rising: the trace backend or the store is slow.",
    ),
    _spec(
        TRACE_SPANS_DROPPED_TOTAL,
        "counter",
        ("reason",),
        "spans",
        "Spans the trace export lost (only while OpenTelemetry tracing is on), by reason:",
        "queue_full (the SDK's batch queue, OTEL_BSP_MAX_QUEUE_SIZE, was full and its",
        "oldest span was pushed out), export_failed (the collector refused or did not",
        "answer a batch). Rising: the collector is down or too slow for the span rate.",
    ),
)

BY_NAME: Mapping[str, MetricSpec] = {spec.name: spec for spec in CATALOGUE}


def spec(name: str) -> MetricSpec:
    """The catalogued metric `name`; KeyError naming this module when there is none."""
    found = BY_NAME.get(name)
    if found is None:
        raise KeyError(
            f"metric {name} is not in the catalogue (service/observability/catalogue.py)"
        )
    return found


def _cell(text: str) -> str:
    """A Markdown table cell: a pipe would end it."""
    return text.replace("|", "\\|")


def reference_page() -> str:
    """docs/reference/metrics.md: the catalogue as a table (docs/generate.py writes it)."""
    lines = [
        "# Metrics",
        "",
        "<!-- Generated from service/observability/catalogue.py by docs/generate.py:",
        "     edit the catalogue, then run `python docs/generate.py`. -->",
        "",
        "Every pinledger server exports these on its admin port (`PINLEDGER_ADMIN_PORT`),",
        "at `/metrics` in the Prometheus text format (with `PINLEDGER_METRICS_TOKEN` set,",
        "a scraper sends `Authorization: Bearer <token>`); `/stats.txt` shows the same in",
        "PinLater's Ostrich layout. A host running `pinledger serve --processes N` answers",
        "once for all its processes, each series labelled `process`. Prometheus adds",
        "`instance` and `job` when it scrapes.",
        "",
        "Histograms have the buckets 1 ms to 300 s (`_bucket`, `_sum`, `_count`). Counters",
        "start at zero when a server starts: use `rate()` or `increase()`. Where a help",
        "says a number is cluster-wide, one server (or every server alike) exports it:",
        "aggregate with `max`, not `sum`.",
        "",
        "| name | type | labels | unit | what it means |",
        "|---|---|---|---|---|",
    ]
    for metric in CATALOGUE:
        labels = ", ".join(f"`{label}`" for label in metric.labels) or "none"
        lines.append(
            f"| `{metric.name}` | {metric.kind} | {labels} | {metric.unit or '-'} "
            f"| {_cell(metric.help)} |"
        )
    return "\n".join(lines) + "\n"
