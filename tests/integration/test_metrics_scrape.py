"""/metrics of a live `pinledger serve` after a workload holds the whole catalogue and
nothing else (issue 40): every catalogued metric appears (a histogram as its _bucket,
_sum and _count series), introduced by its catalogue entry's HELP and TYPE; no
`pinledger_` name appears that the catalogue lacks; each series carries exactly its
metric's labels.

The server is a host of two processes (`serve --processes 2`): its one /metrics merges
both (the supervisor keeps HELP), and dequeues landing on a process short of jobs are
forwarded to the other. The workload reaches every metric: calls that succeed and one
that fails, acks of success and failure, a stale ack the ledger rejects, a claim left to
time out, an idle queue with adaptive partitions (its empty-answer ratio), a record no
release decodes (a paused partition), traced jobs (live traces, to an OTLP receiver),
and a connection closed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pinledger.idl import pinlater as p
from pinledger.ledger.kafka import KafkaLog
from pinledger.ledger.log import Append, queue_topic
from pinledger.service.observability.catalogue import BY_NAME, CATALOGUE, MetricSpec
from pinledger.service.testing.servers import ServerProcess, context, dequeue_until, wait_for
from tests.integration.conftest import Names, server_settings
from tests.integration.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.integration

SUFFIXES = ("_bucket", "_sum", "_count")
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:\\.|[^"\\])*"')


@dataclass
class Scrape:
    """One /metrics answer: each family's HELP and TYPE, and each sample's name with its
    label names."""

    helps: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    samples: dict[str, set[frozenset[str]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Scrape:
        scrape = cls()
        for line in text.splitlines():
            if line.startswith("# HELP "):
                _, _, name, help_ = line.split(" ", 3)
                scrape.helps[name] = help_
            elif line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ", 3)
                scrape.types[name] = kind
            elif line:
                match = _SAMPLE.fullmatch(line)
                assert match, f"not a sample line: {line!r}"
                labels = frozenset(_LABEL.findall(match.group(2) or ""))
                scrape.samples.setdefault(match.group(1), set()).add(labels)
        return scrape

    def missing(self) -> list[str]:
        """The catalogued series that have not appeared."""
        return [name for spec in CATALOGUE for name in _series(spec) if name not in self.samples]


def _series(spec: MetricSpec) -> list[str]:
    if spec.kind == "histogram":
        return [spec.name + suffix for suffix in SUFFIXES]
    return [spec.name]


def _spec_of(sample: str) -> MetricSpec | None:
    found = BY_NAME.get(sample)
    if found is not None:
        return found
    for suffix in SUFFIXES:
        base = BY_NAME.get(sample.removesuffix(suffix))
        if sample.endswith(suffix) and base is not None and base.kind == "histogram":
            return base
    return None


def _text(server: ServerProcess) -> str:
    """The host's /metrics (both processes, merged by the supervisor)."""
    with server.admin_get("/metrics") as answer:
        body: bytes = answer.read()
    return body.decode()


def scrape(server: ServerProcess) -> Scrape:
    return Scrape.parse(_text(server))


def _queue_config(path: Path) -> Path:
    """An adaptive queue that never resizes in a test's time: its empty-answer ratio is
    measured every second, its thresholds are out of reach; and a periodic job."""
    partitions = {
        "min": 1,
        "max": 4,
        "windowSeconds": 1,
        "minDequeues": 1_000_000,
        "cooldownSeconds": 100_000,
        "growRate": 1_000_000,
        "growBacklog": 1_000_000,
    }
    ticking = {"schedules": [{"name": "each-second", "everySeconds": 1, "body": "tick"}]}
    config = {
        "queues": [
            {"name": "adaptive", "queueConfig": {"partitions": partitions}},
            {"name": "ticking", "queueConfig": ticking},
        ]
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _dequeue(server: ServerProcess, queue: str, limit: int = 10) -> dict[str, bytes]:
    client = server.client()
    try:
        answer = client.dequeueJobs(
            context(), p.PinLaterDequeueRequest(queueName=queue, limit=limit)
        )
        jobs: dict[str, bytes] = answer.jobs or {}
        return jobs
    finally:
        client.close()


def _workload(server: ServerProcess, kafka: KafkaLog, prefix: str) -> None:
    client = server.client()
    for queue in ("work", "adaptive", "poison", "ticking"):
        client.createQueue(context(), queue)
    jobs = [p.PinLaterJob(body=b"ok-%d" % i) for i in range(8)]
    jobs += [p.PinLaterJob(body=b"bad", numAttemptsAllowed=1), p.PinLaterJob(body=b"slow")]
    client.enqueueJobs(context(), p.PinLaterEnqueueRequest(queueName="work", jobs=jobs))
    taken = dequeue_until(client, "work", len(jobs), limit=len(jobs), timeout=60)
    ok = [d for d, body in taken.items() if body.startswith(b"ok-")]
    bad = [d for d, body in taken.items() if body == b"bad"]
    # "slow" is never acked: its claim times out (PINLEDGER_CLAIM_TIMEOUT_S).
    acks = p.PinLaterJobAckRequest(
        queueName="work",
        jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor=d) for d in ok],
        jobsFailed=[p.PinLaterJobAckInfo(jobDescriptor=d) for d in bad],
    )
    client.ackDequeuedJobs(context(), acks)
    # Acked twice: the ledger rejects the second (the job is no longer IN_PROGRESS).
    again = p.PinLaterJobAckRequest(
        queueName="work", jobsSucceeded=[p.PinLaterJobAckInfo(jobDescriptor=ok[0])]
    )
    client.ackDequeuedJobs(context(), again)
    with pytest.raises(p.PinLaterException):
        client.dequeueJobs(context(), p.PinLaterDequeueRequest(queueName="missing", limit=1))
    client.close()  # a connection closed by its client
    # A record no release decodes: its partition pauses (decision 0032).
    kafka.append([Append(queue_topic(prefix, "poison"), 0, b"not a pinledger record")])


def test_a_live_server_exports_the_whole_catalogue_and_nothing_else(
    kafka: KafkaLog, names: Names, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    prefix, schema = names
    settings = server_settings(
        PINLEDGER_PROCESSES="2",
        PINLEDGER_PARTITIONS="4",
        PINLEDGER_QUEUE_CONFIG=str(_queue_config(tmp_path / "queues.json")),
        PINLEDGER_QUEUE_METRICS_INTERVAL_S="1",
        PINLEDGER_CLAIM_TIMEOUT_S="3",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_SERVICE_NAME="pinledger-metrics-test",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    server = ServerProcess(prefix=prefix, schema=schema, settings=settings).start(tmp_path)
    try:
        _workload(server, kafka, prefix)
        latest: list[Scrape] = []

        def complete() -> bool:
            _dequeue(server, "adaptive")  # idle: measured as empty answers
            latest[:] = [scrape(server)]
            return not latest[0].missing()

        try:
            wait_for(complete, timeout=90, pause=0.5)
        except AssertionError:
            missing = latest[0].missing()
            pytest.fail(f"catalogued metrics never exported: {missing}\n{server.log_tail()}")
        found = latest[0]

        unknown = sorted(n for n in found.samples if n.startswith("pinledger_") and not _spec_of(n))
        assert unknown == [], f"exported but not in the catalogue: {unknown}"
        assert sorted(n for n in found.types if n not in BY_NAME) == []
        for spec in CATALOGUE:
            assert found.types[spec.name] == spec.kind, spec.name
            assert found.helps[spec.name] == spec.help, spec.name
            for name in _series(spec):
                expected = {*spec.labels, "process"} | (
                    {"le"} if name.endswith("_bucket") else set()
                )
                for labels in found.samples[name]:
                    assert labels == expected, f"{name} has labels {sorted(labels)}"
        # The workload's own numbers (a sample of them), once their time has come.
        for wanted in (
            r'pinledger_jobs_total\{process="\d",action="timeout",queue="work"\} 1\n',
            r'pinledger_rpc_errors_total\{process="\d",code="413",method="dequeueJobs"\} 1\n',
            r'pinledger_partition_paused\{process="\d",partition="0",queue="poison"\} 1\n',
            r'pinledger_queue_jobs\{process="\d",queue="work",state="succeeded"\} 8\n',
            r'pinledger_unowned_partitions\{process="\d"\} 0\n',
            r'pinledger_schedule_ticks_total\{process="\d",queue="ticking",'
            r'schedule="each-second"\} [1-9]\d*\n',
        ):
            wait_for(lambda w=wanted: re.search(w, _text(server)), timeout=30, pause=0.5)
    finally:
        server.stop()


def test_scrape_parsing_sees_a_missing_histogram_series() -> None:
    """The check itself: a histogram without its _bucket series is missing, a name the
    catalogue lacks is unknown."""
    text = "# TYPE pinledger_rpc_seconds histogram\npinledger_rpc_seconds_sum 1\n"
    found = Scrape.parse(text + "pinledger_made_up 3\n")
    assert "pinledger_rpc_seconds_bucket" in found.missing()
    assert "pinledger_rpc_seconds_sum" not in found.missing()
    assert _spec_of("pinledger_made_up") is None
    assert _spec_of("pinledger_rpc_seconds_count") is BY_NAME["pinledger_rpc_seconds"]
