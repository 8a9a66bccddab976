"""The container image, built as `make image` builds it (deploy/image/build.sh: podman
here, on a base made from Debian's packages) and run against the stack on the host's
network: `pinledger migrate`, then the default command (`serve`), a round trip with the
client, /ready, a secret read from a mounted file, and SIGTERM: the container exits 0
well within its grace period, and its partitions move to the other server at once
(it left the owners' group; it did not wait out its session).

Skipped only where no container can run at all (the kernel refuses the namespaces a
container needs); a failure to build or run the image fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pinledger.client import Job, JobState, PinLaterClient
from pinledger.ledger.kafka.log import KafkaLog
from pinledger.projections.pg.store import Store
from pinledger.service.config import Config
from pinledger.service.testing.servers import (
    ROOT,
    ServerProcess,
    free_port,
    run_pinledger,
    wait_for,
)

pytestmark = pytest.mark.integration

# Cold, the build makes the Debian base (about 40 s) and installs the dependencies
# (about 30 s); warm, it reuses both and takes seconds. The bound is for a slow mirror.
BUILD_TIMEOUT_S = 480
# What `podman stop` (and Kubernetes' default terminationGracePeriodSeconds) gives the
# server between SIGTERM and SIGKILL.
GRACE_S = 30
# The servers' Kafka session: a server that stopped without leaving the owners' group
# would keep its partitions this long. The hand-back is seen well before it ends.
SESSION_TIMEOUT_MS = 60_000
HAND_BACK_S = 15
UID = 10001  # the Containerfile's user


@dataclass(frozen=True)
class Built:
    image: str
    engine: str
    # The environment the engine's commands need (podman: CONTAINERS_CONF).
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        done = subprocess.run(
            [self.engine, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            pytest.fail(
                f"{self.engine} {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}",
                pytrace=False,
            )
        return done.stdout + done.stderr


def _namespaces_refused() -> str:
    """Why this machine cannot run any container (the namespaces a container needs are
    refused: no user namespaces for a non-root user, a sandbox without unshare), or ""."""
    command = ["unshare", "--mount", "--uts", "--ipc", "--pid", "--fork", "true"]
    if os.geteuid() != 0:  # rootless podman maps the user into a user namespace
        command[1:1] = ["--user", "--map-root-user"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        return ""  # no unshare to ask: let the engine say
    return "" if done.returncode == 0 else f"{' '.join(command)}: {done.stderr.strip()}"


@pytest.fixture(scope="module")
def built() -> Built:
    refused = _namespaces_refused()
    if refused:
        pytest.skip(f"no container can run on this machine ({refused})")
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "deploy/image/build.sh"],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"deploy/image/build.sh (make image) exited {done.returncode}:\n{done.stderr[-4000:]}",
            pytrace=False,
        )
    said = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    env = dict(os.environ)
    if "CONTAINERS_CONF" in said:
        env["CONTAINERS_CONF"] = said["CONTAINERS_CONF"]
    print(f"image {said['IMAGE']} built in {time.monotonic() - started:.0f} s")
    return Built(image=said["IMAGE"], engine=said["ENGINE"], env=env)


def _release() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        version: str = tomllib.load(f)["project"]["version"]
    return version


def test_the_image_is_this_release_and_its_user_is_not_root(built: Built) -> None:
    assert built.image == f"pinledger:{_release()}"
    ours = run_pinledger("--version")
    assert ours.returncode == 0, ours.stderr
    assert built.run("run", "--rm", built.image, "--version") == ours.stdout
    label = built.run(
        "image", "inspect", "--format",
        '{{index .Config.Labels "org.opencontainers.image.version"}}', built.image,
    )  # fmt: skip
    assert label.strip() == _release()
    assert built.run("image", "inspect", "--format", "{{.Config.User}}", built.image).strip() == (
        f"{UID}:{UID}"
    )
    env = built.run("image", "inspect", "--format", "{{json .Config.Env}}", built.image)
    assert '"PINLEDGER_HOST=0.0.0.0"' in env
    # `latest` is the same image.
    ids = {
        built.run("image", "inspect", "--format", "{{.Id}}", name).strip()
        for name in (built.image, "pinledger:latest")
    }
    assert len(ids) == 1


@pytest.fixture
def schema(config: Config) -> Iterator[str]:
    name = f"image_{uuid.uuid4().hex[:10]}"
    yield name
    Store(config.pg_dsn, name).drop()


@dataclass
class Container:
    built: Built
    name: str
    port: int
    admin_port: int

    def logs(self) -> str:
        return self.built.run("logs", self.name, check=False)[-5000:]

    def status(self) -> str:
        return self.built.run(
            "inspect", "--format", "{{.State.Status}}", self.name, check=False
        ).strip()

    def get(self, path: str, token: str = "") -> int:
        request = urllib.request.Request(f"http://127.0.0.1:{self.admin_port}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.status() not in {"running", "created", "configured"}:
                pytest.fail(f"the container stopped:\n{self.logs()}", pytrace=False)
            try:
                if self.get("/health") == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        pytest.fail(f"not healthy after {timeout} s:\n{self.logs()}", pytrace=False)


def _settings(config: Config, prefix: str, schema: str) -> dict[str, str]:
    """The container's PINLEDGER_* settings: the ones the tests run with (the stack's,
    or CI's), this test's prefix and schema."""
    settings = {k: v for k, v in os.environ.items() if k.startswith("PINLEDGER_")}
    settings.update(
        PINLEDGER_KAFKA=config.kafka,
        PINLEDGER_PG_DSN=config.pg_dsn,
        PINLEDGER_SCHEMA=schema,
        PINLEDGER_TOPIC_PREFIX=prefix,
    )
    return settings


def _env_args(settings: dict[str, str]) -> list[str]:
    return [arg for name, value in settings.items() for arg in ("--env", f"{name}={value}")]


def _round_trip(port: int, queue: str) -> None:
    with PinLaterClient(f"127.0.0.1:{port}") as client:
        client.create_queue(queue)
        (descriptor,) = client.enqueue(queue, [Job(b"from-the-image")])
        jobs = wait_for(lambda: client.dequeue(queue, 1), timeout=60)
        assert [j.descriptor for j in jobs] == [descriptor]
        assert jobs[0].body == b"from-the-image"
        client.ack(queue, succeeded=[descriptor])

        def succeeded() -> bool:
            info = client.lookup([descriptor], include_body=True)[descriptor]
            return info.state == JobState.SUCCEEDED and info.body == b"from-the-image"

        wait_for(succeeded, timeout=30)


def _pid1(container: Container) -> tuple[list[str], int]:
    """PID 1's command line and user id, inside the container."""
    built = container.built
    argv = built.run("exec", container.name, "cat", "/proc/1/cmdline").split("\0")
    status = built.run("exec", container.name, "cat", "/proc/1/status")
    uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
    return [a for a in argv if a], int(uid)


def test_the_container_migrates_serves_and_hands_its_partitions_back_on_sigterm(
    built: Built, config: Config, kafka: KafkaLog, prefix: str, schema: str, tmp_path: Path
) -> None:
    settings = _settings(config, prefix, schema)
    out = built.run(
        "run", "--rm", "--network", "host", *_env_args(settings), built.image, "migrate"
    )
    assert "applied 0001_initial.sql" in out

    # A secret the way a platform mounts one: a file, named by PINLEDGER_<NAME>_FILE.
    token = uuid.uuid4().hex
    secret = tmp_path / "metrics-token"
    secret.write_text(token + "\n")
    secret.chmod(0o644)  # the container's user is not the file's owner
    port, admin_port = free_port(), free_port()
    container = Container(built, f"pinledger-test-{uuid.uuid4().hex[:10]}", port, admin_port)
    settings.update(
        # Loopback only, on the host's network; the image's own default is 0.0.0.0
        # (the test above).
        PINLEDGER_HOST="127.0.0.1",
        PINLEDGER_ADVERTISE_HOST="127.0.0.1",
        PINLEDGER_PORT=str(port),
        PINLEDGER_ADMIN_PORT=str(admin_port),
        PINLEDGER_SERVER_ID=f"container-{port}",
        PINLEDGER_SESSION_TIMEOUT_MS=str(SESSION_TIMEOUT_MS),
        PINLEDGER_METRICS_TOKEN_FILE="/run/secrets/metrics-token",
    )
    peer = ServerProcess(
        prefix=prefix,
        schema=schema,
        settings={"PINLEDGER_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS)},
    )
    built.run(
        "run", "--detach", "--name", container.name, "--network", "host",
        "--volume", f"{secret}:/run/secrets/metrics-token:ro",
        *_env_args(settings), built.image,
    )  # fmt: skip
    try:
        container.wait_healthy()
        argv, uid = _pid1(container)
        # pinledger itself is PID 1 (exec form: no shell to swallow SIGTERM), not root.
        assert argv[-2:] == ["/opt/pinledger/bin/pinledger", "serve"], argv
        assert uid == UID
        queue = f"image_{uuid.uuid4().hex[:8]}"
        _round_trip(port, queue)
        wait_for(lambda: container.get("/ready") == 200, timeout=30)
        assert container.get("/metrics") == 401
        assert container.get("/metrics", token) == 200

        peer.start(tmp_path)
        topic = f"{prefix}q.{queue}"

        def owners() -> dict[int, set[int]]:
            """The owners' group: each member's server port -> its partitions of the
            queue (a member id ends in the server's address)."""
            members = kafka.group_members(f"{prefix}owners")
            return {
                int(m.member_id.rsplit(":", 1)[1]): {p for t, p in m.partitions if t == topic}
                for m in members
            }

        # Both serve: the container owns some of the queue's partitions, the peer the rest.
        before = wait_for(
            lambda: (
                (found := owners()).keys() == {port, peer.port} and all(found.values()) and found
            ),
            timeout=30,
        )
        partitions = before[port] | before[peer.port]

        started = time.monotonic()
        built.run("stop", "--time", str(GRACE_S), container.name, timeout=GRACE_S + 30)
        stopped_s = time.monotonic() - started
        code = built.run("inspect", "--format", "{{.State.ExitCode}}", container.name).strip()
        logs = container.logs()
        assert code == "0", f"exit code {code} after {stopped_s:.1f} s:\n{logs}"
        assert stopped_s < GRACE_S - 5, logs
        assert "signal 15: stopping" in logs
        # Its partitions moved at once: it left the group as it stopped, rather than
        # being dropped once its session ran out.
        try:
            wait_for(lambda: owners() == {peer.port: partitions}, timeout=HAND_BACK_S)
        except AssertionError:
            pytest.fail(
                f"{HAND_BACK_S} s after the container stopped, the owners' group is "
                f"{owners()} (server port -> partitions of {topic}), not the peer "
                f"{peer.port} alone with {partitions}: the container did not hand its "
                f"partitions back\n{logs}",
                pytrace=False,
            )
        print(f"the container stopped in {stopped_s:.1f} s")
    finally:
        built.run("rm", "--force", container.name, check=False)
        peer.stop()
