"""The wheel works outside the checkout: build it, install it into a fresh virtualenv,
and from that install migrate a scratch schema, serve, and make one enqueue ->
dequeue -> ack -> lookup round trip with the installed client.

The wheel also holds every file of the folders pyproject.toml's package-dir maps into
pinledger (ledger/, service/, ... at the root: docs/decisions/0009-package-layout.md),
and nothing else.

The editable install of the checkout hides packaging mistakes (a data file left out of
the wheel, a subpackage missing from pyproject's list, an import of a module that only
exists in the repository); this test is the only place that would notice them.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinledger.ledger.kafka.log import KafkaLog
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.testing.servers import ROOT, ServerProcess, running

pytestmark = pytest.mark.integration

# Runs in the virtualenv's Python, from a directory outside the checkout.
ROUND_TRIP = """
import sys, time
import pinledger
from pinledger.client import Job, JobState, PinLaterClient
assert "site-packages" in pinledger.__file__, pinledger.__file__
port, queue = sys.argv[1], sys.argv[2]
with PinLaterClient(f"127.0.0.1:{port}") as client:
    client.create_queue(queue)
    (descriptor,) = client.enqueue(queue, [Job(b"from-the-wheel")])
    deadline = time.monotonic() + 60
    jobs = []
    while not jobs and time.monotonic() < deadline:
        jobs = client.dequeue(queue, 1)
        time.sleep(0.1)
    assert [j.descriptor for j in jobs] == [descriptor], jobs
    assert jobs[0].body == b"from-the-wheel"
    client.ack(queue, succeeded=[descriptor])
    while time.monotonic() < deadline:
        info = client.lookup([descriptor], include_body=True)[descriptor]
        if info.state == JobState.SUCCEEDED:
            break
        time.sleep(0.1)
    assert info.state == JobState.SUCCEEDED, info
    assert info.body == b"from-the-wheel"
print("round trip ok", descriptor)
"""


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}"
            f"\n{done.stderr[-3000:]}",
            pytrace=False,
        )
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built as `make wheel` builds it, from a copy of the files a clone
    would have (tracked, or new and not ignored): setuptools reuses the checkout's
    build/lib, so a build in place could ship a module deleted since the last one."""
    base = tmp_path_factory.mktemp("wheel")
    source, dist = base / "src", base / "dist"
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT)
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if path.is_file():  # a file deleted but not yet staged is still listed
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        base,
    )
    (built,) = dist.glob("pinledger-*.whl")
    return built


def _virtualenv(wheel: Path, name: str, requirement: str) -> Path:
    """A fresh virtualenv (no system site-packages) with `requirement` (the built wheel,
    with or without an extra) and its dependencies installed."""
    env_dir = wheel.parent.parent / name
    _run([sys.executable, "-m", "venv", str(env_dir)], wheel.parent)
    _run([str(env_dir / "bin" / "pip"), "install", "-q", requirement], wheel.parent)
    return env_dir


@pytest.fixture(scope="module")
def venv(wheel: Path) -> Path:
    """The server's install: the wheel with its `server` extra."""
    return _virtualenv(wheel, "venv", f"{wheel}[server]")


@pytest.fixture(scope="module")
def client_venv(wheel: Path) -> Path:
    """A client-only install: the wheel alone, as `pip install pinledger` makes it."""
    return _virtualenv(wheel, "client-venv", str(wheel))


def _mapped_files() -> dict[str, Path]:
    """Wheel name -> file in the checkout, for every file of every folder that
    pyproject.toml's package-dir maps into pinledger (modules and data alike)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        package_dir: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    files = {}
    for package, folder in package_dir.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                rel = path.relative_to(ROOT / folder).as_posix()
                files[f"{package.replace('.', '/')}/{rel}"] = path
    return files


def test_the_wheel_holds_every_module_and_data_file_of_the_mapped_folders(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = configparser.ConfigParser()
        (dist_info,) = {n.split("/")[0] for n in names if ".dist-info/" in n}
        entry_points.read_string(zf.read(f"{dist_info}/entry_points.txt").decode())
    mapped = _mapped_files()
    assert {"pinledger/__init__.py", "pinledger/ledger/state.py"} <= set(mapped)
    assert "pinledger/thrift/pinlater.thrift" in mapped
    assert "pinledger/migrations/mysql/0001_initial.sql" in mapped
    missing = sorted(set(mapped) - names)
    assert missing == [], f"in the checkout but not in the wheel (pyproject's packages?): {missing}"
    # Nothing else: no top-level ledger/ or service/, only pinledger and its metadata.
    stray = sorted(n for n in names - set(mapped) if not n.startswith(f"{dist_info}/"))
    assert stray == []
    # The command names a module the wheel holds.
    module = entry_points["console_scripts"]["pinledger"].split(":")[0]
    assert module.replace(".", "/") + ".py" in names


def _installed_env(config: Config, schema: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PINLEDGER_PG_DSN=config.pg_dsn, PINLEDGER_SCHEMA=schema)
    return env


@pytest.fixture
def scratch_schema(config: Config) -> Iterator[str]:
    name = f"wheel_{uuid.uuid4().hex[:10]}"
    yield name
    Store(config.pg_dsn, name).drop()


def test_the_wheel_carries_the_idl_sql_and_migrations(venv: Path, tmp_path: Path) -> None:
    out = _run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import pinledger, pinledger.idl, pinledger.projections.pg.sql as s; "
            "assert len(pinledger.__path__) == 1, pinledger.__path__; "
            "import pinledger.projections.mysql.sql as m; "
            "print(len(s.migrations()), len(s.queries()), len(m.migrations()), "
            "len(m.queries()), pinledger.idl.pinlater.PinLater)",
        ],
        tmp_path,
    )
    migrations, queries, mysql_migrations, mysql_queries = (int(n) for n in out.split()[:4])
    assert migrations >= 2
    assert queries > 10
    # The MySQL store's SQL is package data too (projections/mysql, migrations/mysql).
    assert mysql_migrations >= 1
    assert mysql_queries > 10


def test_installed_wheel_migrates_serves_and_round_trips(
    venv: Path, tmp_path: Path, config: Config, kafka: KafkaLog, scratch_schema: str
) -> None:
    env = _installed_env(config, scratch_schema)
    out = _run([str(venv / "bin" / "pinledger"), "migrate"], tmp_path, env)
    assert "applied 0001_initial.sql" in out

    prefix = f"wheel{uuid.uuid4().hex[:8]}."
    server = ServerProcess(
        prefix=prefix,
        schema=scratch_schema,
        command=(str(venv / "bin" / "pinledger"), "serve"),
        cwd=tmp_path,
    )
    try:
        with running([server], tmp_path):
            queue = f"wheel_{uuid.uuid4().hex[:8]}"
            out = _run(
                [str(venv / "bin" / "python"), "-c", ROUND_TRIP, str(server.port), queue],
                tmp_path,
                env,
            )
            assert "round trip ok" in out
    finally:
        for topic in kafka.topics():
            if topic.startswith(prefix):
                kafka.delete_topic(topic)


# Runs in the client-only virtualenv: none of the server's drivers is there.
NO_SERVER = """
import importlib.util
absent = [m for m in ("psycopg", "psycopg_pool", "kafka", "confluent_kafka", "pymysql")
          if importlib.util.find_spec(m) is None]
print(" ".join(absent))
"""


def test_a_client_only_install_enqueues_works_jobs_and_names_the_server_extra(
    client_venv: Path, tmp_path: Path, config: Config, kafka: KafkaLog, scratch_schema: str
) -> None:
    absent = _run([str(client_venv / "bin" / "python"), "-c", NO_SERVER], tmp_path).split()
    assert absent == ["psycopg", "psycopg_pool", "kafka", "confluent_kafka", "pymysql"]
    pinledger = str(client_venv / "bin" / "pinledger")
    assert "MODULE:HANDLER" in _run([pinledger, "worker", "--help"], tmp_path)
    assert "--mode" in _run([pinledger, "client", "--help"], tmp_path)
    refused = subprocess.run(
        [pinledger, "serve"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode == 2
    assert "pip install 'pinledger[server]'" in refused.stderr
    assert "Traceback" not in refused.stderr

    prefix = f"wheelc{uuid.uuid4().hex[:8]}."
    server = ServerProcess(prefix=prefix, schema=scratch_schema)  # from the checkout
    try:
        with running([server], tmp_path):
            queue = f"wheel_{uuid.uuid4().hex[:8]}"
            out = _run(
                [str(client_venv / "bin" / "python"), "-c", ROUND_TRIP, str(server.port), queue],
                tmp_path,
                _installed_env(config, scratch_schema),
            )
            assert "round trip ok" in out
    finally:
        for topic in kafka.topics():
            if topic.startswith(prefix):
                kafka.delete_topic(topic)
