"""Jaeger, the trace viewer the trace tests check pinledger's spans in: its all-in-one
command (Jaeger v2) built once from the Go module proxy at a pinned version
(bench/gotool.py, cached outside the repository as the benchmark caches River), run on
loopback with in-memory storage, asked through its HTTP API (`/api/traces`, what its
UI reads). Tests skip with a message only where Go is absent; any other failure to
build or start it fails them."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pinledger.service.testing.servers import free_port, stop_process
from tests import gotools

VERSION = "v1.76.0"
MODULE = "github.com/jaegertracing/jaeger/cmd/jaeger"
START_LIMIT_S = 60

CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


def binary() -> Path:
    return gotools.built("Jaeger", MODULE, VERSION)


@dataclass
class Jaeger:
    otlp_port: int
    query_port: int

    @property
    def endpoint(self) -> str:
        """Where OTEL_EXPORTER_OTLP_ENDPOINT points."""
        return f"http://127.0.0.1:{self.otlp_port}"

    def get(self, path: str, **query: str) -> Any:
        url = f"http://127.0.0.1:{self.query_port}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)

    def services(self) -> list[str]:
        return sorted(self.get("/api/services").get("data") or [])

    def traces(self, service: str, **tags: str) -> list[dict[str, Any]]:
        """The traces with a span of `service` carrying these tags, as the UI's search
        finds them."""
        found = self.get(
            "/api/traces", service=service, tags=json.dumps(tags), limit="100", lookback="1h"
        )
        return list(found.get("data") or [])


@contextmanager
def running(log_dir: Path) -> Iterator[Jaeger]:
    command = binary()
    jaeger = Jaeger(otlp_port=free_port(), query_port=free_port())
    config = log_dir / "jaeger.yaml"
    config.write_text(
        CONFIG.format(otlp=jaeger.otlp_port, query=jaeger.query_port, query_grpc=free_port())
    )
    log = log_dir / "jaeger.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(command), "--config", f"file:{config}"], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"Jaeger exited at start:\n{log.read_text()[-3000:]}")
            try:
                jaeger.services()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"Jaeger did not answer in {START_LIMIT_S} s:\n{log.read_text()}")
                time.sleep(0.2)
        yield jaeger
    finally:
        stop_process(proc)


def spans_of(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return list(trace.get("spans") or [])


def tag(span: dict[str, Any], key: str) -> Any:
    return next((t["value"] for t in span.get("tags") or [] if t["key"] == key), None)


def parent_of(span: dict[str, Any]) -> str | None:
    """The span id of the span's parent (its CHILD_OF reference), or None for a root."""
    return next(
        (r["spanID"] for r in span.get("references") or [] if r["refType"] == "CHILD_OF"),
        None,
    )


def service_of(trace: dict[str, Any], span: dict[str, Any]) -> str:
    return str(trace["processes"][span["processID"]]["serviceName"])
