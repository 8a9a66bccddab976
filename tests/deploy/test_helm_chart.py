"""The Helm chart (deploy/helm/pinledger), linted and rendered with each values file of
its ci/ folder and with its defaults: what Kubernetes would run. The manifests are
checked against what the server needs: its probes and ports, the migrate hook that
must stop a rollout, a stop that fits the grace period, secrets by reference only, a
queue config that reloads, and settings the server's own parser takes."""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pinledger.cli.migrate import EXIT_NEEDS_PAUSE
from pinledger.service.config import SECRETS, Config
from pinledger.service.queue_config import parse_queue_config
from pinledger.service.security.password import hash_password_scrypt
from tests.deploy import helm, rules

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["defaults", "minimal", "production", "sharded"]
# Settings that are, or hold, a secret (a DSN carries its password).
SECRET_SETTINGS = {f"PINLEDGER_{name.upper()}" for name in SECRETS} | {
    "PINLEDGER_STORE_DSN",
    "PINLEDGER_PG_DSN",
}
# Owner.stop joins its threads with these timeouts (service/ownership/owner.py).
POD_IP = "10.1.2.3"

Manifest = dict[str, Any]


def values_of(scenario: str) -> list[Path]:
    return [] if scenario == "defaults" else [helm.VALUES / f"{scenario}-values.yaml"]


@functools.cache
def _rendered(scenario: str) -> str:
    return json.dumps(helm.template(values_of(scenario)))


def rendered(scenario: str) -> list[Manifest]:
    """The scenario's manifests (rendered once, a fresh copy each call)."""
    manifests: list[Manifest] = json.loads(_rendered(scenario))
    return manifests


def values(scenario: str) -> dict[str, Any]:
    """The chart's values.yaml merged with the scenario's file (two levels deep is
    all the files use)."""
    merged: dict[str, Any] = yaml.safe_load((helm.CHART / "values.yaml").read_text())
    for path in values_of(scenario):
        for key, value in yaml.safe_load(path.read_text()).items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    return merged


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: list[Manifest], kind: str) -> Manifest:
    (found,) = of_kind(manifests, kind)
    return found


def pod_spec(workload: Manifest) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: Manifest) -> dict[str, Any]:
    (only,) = pod_spec(workload)["containers"]
    return dict(only)


def env_of(workload: Manifest) -> dict[str, dict[str, Any]]:
    entries = container(workload)["env"]
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), f"a variable set twice: {names}"
    return {e["name"]: e for e in entries}


def workloads(manifests: list[Manifest]) -> list[Manifest]:
    return of_kind(manifests, "Deployment") + of_kind(manifests, "Job")


def secret_mounts(workload: Manifest) -> dict[str, str]:
    """mountPath -> Secret name, for the container's mounts of Secret volumes."""
    secrets = {
        v["name"]: v["secret"]["secretName"] for v in pod_spec(workload)["volumes"] if "secret" in v
    }
    return {
        m["mountPath"]: secrets[m["name"]]
        for m in container(workload).get("volumeMounts", [])
        if m["name"] in secrets
    }


def test_the_chart_is_released_with_the_package() -> None:
    chart = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())
    release = importlib.metadata.version("pinledger")
    assert chart["appVersion"] == release
    # SemVer's spelling of the same release: 0.2.0.dev0 -> 0.2.0-dev0.
    assert chart["version"] == re.sub(r"\.?(dev|a|b|rc)(\d+)$", r"-\1\2", release)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_helm_lint_passes(scenario: str) -> None:
    assert "0 chart(s) failed" in helm.lint(values_of(scenario))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_probes_ask_the_admin_port(scenario: str) -> None:
    manifests = rendered(scenario)
    deployment = one(manifests, "Deployment")
    server = container(deployment)
    env = env_of(deployment)
    ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    assert ports["admin"] == int(env["PINLEDGER_ADMIN_PORT"]["value"])
    assert ports["thrift"] == int(env["PINLEDGER_PORT"]["value"])
    scheme = "HTTPS" if "PINLEDGER_TLS_CERTFILE" in env else "HTTP"
    readiness = values(scenario)["probes"]["readiness"]["path"]
    for probe, path in [
        ("startupProbe", "/health"),
        ("livenessProbe", "/health"),
        ("readinessProbe", readiness),
    ]:
        get = server[probe]["httpGet"]
        assert (get["path"], get["port"], get["scheme"]) == (path, "admin", scheme), probe
    assert (scenario == "sharded") == (readiness == "/health")
    # The startup probe gives a server a minute or more to open the store and Kafka.
    startup = server["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_pod_runs_confined(scenario: str) -> None:
    for workload in workloads(rendered(scenario)):
        pod = pod_spec(workload)
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        context = container(workload)["securityContext"]
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        # The one writable place: an emptyDir on /tmp.
        (tmp,) = [m for m in container(workload)["volumeMounts"] if m["mountPath"] == "/tmp"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == tmp["name"]]
        assert "emptyDir" in volume


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_secret_value_is_rendered(scenario: str) -> None:
    """Secrets come from Secrets that exist: a secretKeyRef, or a *_FILE setting naming
    a file in a mounted Secret. The chart renders no Secret of its own."""
    manifests = rendered(scenario)
    assert of_kind(manifests, "Secret") == []
    for workload in workloads(manifests):
        mounts = secret_mounts(workload)
        for name, entry in env_of(workload).items():
            if name in SECRET_SETTINGS:
                assert "value" not in entry, name
                ref = entry["valueFrom"]["secretKeyRef"]
                assert ref["name"] and ref["key"], name
            elif name.endswith("_FILE") or name in (
                "PINLEDGER_TLS_KEYFILE",
                "PINLEDGER_KAFKA_SSL_KEYFILE",
            ):
                path = Path(entry["value"])
                assert any(path.parent == Path(m) for m in mounts), (name, path, mounts)
    if scenario == "production":
        named = {m for w in workloads(manifests) for m in secret_mounts(w).values()}
        named |= {
            e["valueFrom"]["secretKeyRef"]["name"]
            for w in workloads(manifests)
            for e in env_of(w).values()
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert named == {
            "pinledger-store",
            "pinledger-kafka-sasl",
            "pinledger-kafka-ca",
            "pinledger-tls",
            "pinledger-admin",
            "pinledger-metrics",
            "pinledger-store-ca",
        }


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("ADMIN_PASSWORD_HASH", "a secret is never a value in the chart"),
        ("METRICS_TOKEN_FILE", "a secret is never a value in the chart"),
        ("STORE_DSN", "a secret is never a value in the chart"),
        ("HOST", "the chart sets PINLEDGER_HOST itself"),
        ("APPEND_TIMEOUT_S", "use server.appendTimeoutS"),
    ],
)
def test_a_setting_the_chart_owns_or_a_secret_is_refused(setting: str, message: str) -> None:
    with pytest.raises(helm.HelmError, match=message):
        helm.template(sets={f"server.settings.{setting}": "x"})


def test_a_store_is_required() -> None:
    with pytest.raises(helm.HelmError, match=r"store\.existingSecret"):
        helm.template(sets={"store.existingSecret": ""})


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_setting_is_one_the_server_reads(scenario: str) -> None:
    known = {f"PINLEDGER_{f.name.upper()}" for f in dataclasses.fields(Config)}
    from_files = {f"PINLEDGER_{name.upper()}_FILE" for name in SECRETS}
    for workload in workloads(rendered(scenario)):
        for name in env_of(workload):
            if name.startswith("PINLEDGER_"):
                assert name in known | from_files, f"{name}: no such setting (service/config.py)"


def as_config(workload: Manifest, tmp_path: Path) -> Config:
    """The container's environment as the server reads it: the pod IP filled in, a
    Secret's key given a value, and each file under /etc/pinledger made in tmp_path."""
    env: dict[str, str] = {}
    for name, entry in env_of(workload).items():
        source = entry.get("valueFrom", {})
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "status.podIP"
            env[name] = POD_IP
        elif "secretKeyRef" in source:
            env[name] = "postgresql://pinledger:secret@db:5432/pinledger"
        else:
            env[name] = str(entry["value"])
        if env[name].startswith("/etc/pinledger/"):
            path = tmp_path / env[name].removeprefix("/etc/pinledger/")
            path.parent.mkdir(parents=True, exist_ok=True)
            hashed = name == "PINLEDGER_ADMIN_PASSWORD_HASH_FILE"
            path.write_text(hash_password_scrypt("pw") if hashed else '{"queues": []}')
            env[name] = str(path)
    return Config.from_env(env)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_server_takes_the_rendered_settings(scenario: str, tmp_path: Path) -> None:
    deployment = one(rendered(scenario), "Deployment")
    config = as_config(deployment, tmp_path)
    # Bound to every address; advertised to the other servers at the pod IP.
    assert config.host == "0.0.0.0"
    env = env_of(deployment)
    assert env["PINLEDGER_ADVERTISE_HOST"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "status.podIP"}
    }
    port = config.peer_port or config.port
    assert config.address == f"{POD_IP}:{port}"
    ports = {p["containerPort"] for p in container(deployment)["ports"]}
    assert {port + i for i in range(config.processes)} <= ports
    config.kafka_security()
    config.admin_password()
    assert config.kafka == values(scenario)["kafka"]["bootstrap"]


def test_processes_get_peer_ports() -> None:
    deployment = one(rendered("sharded"), "Deployment")
    env = env_of(deployment)
    assert env["PINLEDGER_PROCESSES"]["value"] == "2"
    assert env["PINLEDGER_PEER_PORT"]["value"] == "9020"
    ports = {p["name"]: p["containerPort"] for p in container(deployment)["ports"]}
    assert ports == {"thrift": 9010, "peer-0": 9020, "peer-1": 9021, "admin": 9999}


def grace_and_sleep(deployment: Manifest) -> tuple[int, int]:
    pod = pod_spec(deployment)
    command = container(deployment)["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    return pod["terminationGracePeriodSeconds"], int(command[1])


def longest_stop_s(deployment: Manifest) -> float:
    """How long a server may take from SIGTERM to its exit, from its settings: the calls
    in flight drained, then the claims they started landing while the owner's threads
    stop (Server.stop, Owner.stop)."""
    timeout = float(env_of(deployment)["PINLEDGER_APPEND_TIMEOUT_S"]["value"])
    config = Config(append_timeout_s=timeout)
    return config.stop_s


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_grace_period_covers_the_prestop_sleep_and_the_hand_back(scenario: str) -> None:
    deployment = one(rendered(scenario), "Deployment")
    grace, sleep = grace_and_sleep(deployment)
    assert 0 < sleep < grace
    assert grace >= sleep + longest_stop_s(deployment)


@pytest.mark.parametrize("append_timeout_s", ["2.5", "15", "40"])
def test_the_grace_period_follows_the_append_timeout(append_timeout_s: str) -> None:
    deployment = one(helm.template(sets={"server.appendTimeoutS": append_timeout_s}), "Deployment")
    grace, sleep = grace_and_sleep(deployment)
    assert grace >= sleep + longest_stop_s(deployment)
    # ... and not far beyond: a stuck pod is killed within a minute of the bound.
    assert grace <= sleep + longest_stop_s(deployment) + 60
    explicit = helm.template(sets={"shutdown.terminationGracePeriodSeconds": "300"})
    assert grace_and_sleep(one(explicit, "Deployment"))[0] == 300


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_migrate_job_is_a_hook_that_stops_a_rollout(scenario: str) -> None:
    manifests = rendered(scenario)
    jobs = of_kind(manifests, "Job")
    if not values(scenario)["migrate"]["hook"]:
        assert jobs == []
        return
    (job,) = jobs
    notes = job["metadata"]["annotations"]
    assert set(notes["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    # Replaced at the next attempt; kept after a failure, with its log.
    assert set(notes["helm.sh/hook-delete-policy"].split(",")) == {
        "before-hook-creation",
        "hook-succeeded",
    }
    # Only the Job is a hook: everything else changes after it succeeded.
    others = [m for m in manifests if m is not job]
    assert not any("helm.sh/hook" in m["metadata"].get("annotations", {}) for m in others)
    spec = job["spec"]
    assert spec["backoffLimit"] == values(scenario)["migrate"]["backoffLimit"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    # A migration that needs the servers stopped fails the Job at once, not retried.
    (fail,) = [r for r in spec["podFailurePolicy"]["rules"] if r["action"] == "FailJob"]
    assert fail["onExitCodes"] == {
        "containerName": container(job)["name"],
        "operator": "In",
        "values": [EXIT_NEEDS_PAUSE],
    }
    assert container(job)["args"] == ["migrate"]
    # The same store as the servers.
    store = {"PINLEDGER_STORE_DSN", "PINLEDGER_SCHEMA", "PINLEDGER_STORE_SHARDS"}
    servers = env_of(one(manifests, "Deployment"))
    assert {n: e for n, e in env_of(job).items() if n in store} == {
        n: e for n, e in servers.items() if n in store
    }


def test_allow_pause_is_passed_on_only_when_asked() -> None:
    job = one(helm.template(sets={"migrate.allowPause": "true"}), "Job")
    assert container(job)["args"] == ["migrate", "--allow-pause"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_disruption_budget_covers_the_servers(scenario: str) -> None:
    manifests = rendered(scenario)
    budget = one(manifests, "PodDisruptionBudget")
    assert budget["apiVersion"] == "policy/v1"
    assert (
        budget["spec"]["maxUnavailable"]
        == values(scenario)["podDisruptionBudget"]["maxUnavailable"]
    )
    deployment = one(manifests, "Deployment")
    selector = budget["spec"]["selector"]["matchLabels"]
    assert selector == deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    for job in of_kind(manifests, "Job"):
        assert not selector.items() <= job["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_services_reach_the_thrift_and_admin_ports(scenario: str) -> None:
    manifests = rendered(scenario)
    deployment = one(manifests, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    named = {p["name"] for p in container(deployment)["ports"]}
    services = {s["metadata"]["name"]: s for s in of_kind(manifests, "Service")}
    assert set(services) == {f"{helm.RELEASE}-pinledger", f"{helm.RELEASE}-pinledger-admin"}
    for name, target in [
        (f"{helm.RELEASE}-pinledger", "thrift"),
        (f"{helm.RELEASE}-pinledger-admin", "admin"),
    ]:
        spec = services[name]["spec"]
        assert spec["selector"].items() <= labels.items()
        (port,) = spec["ports"]
        assert port["targetPort"] == target and target in named


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_queue_config_is_a_mounted_directory(scenario: str) -> None:
    manifests = rendered(scenario)
    deployment = one(manifests, "Deployment")
    settings = values(scenario)["queueConfig"]
    (volume,) = [v for v in pod_spec(deployment)["volumes"] if "configMap" in v]
    (mount,) = [m for m in container(deployment)["volumeMounts"] if m["name"] == volume["name"]]
    # subPath would freeze the file: the kubelet never updates such a mount.
    for workload in workloads(manifests):
        assert all("subPath" not in m for m in container(workload)["volumeMounts"])
    path = env_of(deployment)["PINLEDGER_QUEUE_CONFIG"]["value"]
    assert path == f"{mount['mountPath']}/{settings['key']}"
    configmaps = of_kind(manifests, "ConfigMap")
    if settings["existingConfigMap"]:
        assert configmaps == []
        assert volume["configMap"]["name"] == settings["existingConfigMap"]
        return
    (configmap,) = configmaps
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    # The server's own parser takes it, and it holds the values' queues.
    text = configmap["data"][settings["key"]]
    assert parse_queue_config(text) == parse_queue_config(
        json.dumps({"queues": settings["queues"]})
    )


def test_a_queue_config_edit_restarts_no_server() -> None:
    """The servers re-read the file: the pod template does not change with it (no
    checksum annotation), so an upgrade that changes only the queues rolls out nothing."""
    before = rendered("production")
    queues = [{"name": "mail", "queueConfig": {"maxJobsPerSecond": 5}}]
    after = helm.template(
        [helm.VALUES / "production-values.yaml"], set_json={"queueConfig.queues": queues}
    )
    assert one(before, "Deployment") == one(after, "Deployment")
    assert one(before, "ConfigMap") != one(after, "ConfigMap")
    text = one(after, "ConfigMap")["data"]["queues.json"]
    assert parse_queue_config(text).rates() == {"mail": 5.0}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_resources_are_requested(scenario: str) -> None:
    manifests = rendered(scenario)
    wanted = values(scenario)["resources"]
    resources = container(one(manifests, "Deployment"))["resources"]
    assert resources == wanted
    assert {"cpu", "memory"} <= resources["requests"].keys()
    assert "memory" in resources["limits"]
    for job in of_kind(manifests, "Job"):
        assert container(job)["resources"] == values(scenario)["migrate"]["resources"]


def test_monitoring_is_off_unless_asked() -> None:
    kinds = {m["kind"] for m in rendered("defaults")}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}


def test_the_service_monitor_scrapes_the_admin_service() -> None:
    manifests = rendered("production")
    monitor = one(manifests, "ServiceMonitor")
    services = of_kind(manifests, "Service")
    (admin,) = [s for s in services if s["metadata"]["name"].endswith("-admin")]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= admin["metadata"]["labels"].items()
    (thrift,) = [s for s in services if s is not admin]
    assert not selector.items() <= thrift["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    (endpoint,) = monitor["spec"]["endpoints"]
    scrape = (endpoint["port"], endpoint["path"], endpoint["scheme"])
    assert scrape == ("admin", "/metrics", "https")
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": "pinledger-tls", "key": "ca.crt"}
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "pinledger-metrics", "key": "token"},
    }


def test_the_prometheus_rule_holds_the_rules_file() -> None:
    rule = one(rendered("production"), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["spec"]["groups"] == rules.groups()


def test_the_runbook_links_point_into_the_manual_where_it_is_served() -> None:
    base = "https://docs.example.com/pinledger"
    manifests = helm.template(
        values_of("production"), sets={"prometheusRule.runbookBaseUrl": base + "/"}
    )
    rendered_alerts = [
        r for g in one(manifests, "PrometheusRule")["spec"]["groups"] for r in g["rules"]
    ]
    shipped = rules.alerts()
    assert [r["alert"] for r in rendered_alerts if "alert" in r] == [r["alert"] for r in shipped]
    for rule in shipped:
        url = rule["annotations"]["runbook_url"]
        rule["annotations"]["runbook_url"] = url.replace(rules.MANUAL_URL, base)
    assert [r for r in rendered_alerts if "alert" in r] == shipped


def test_extra_rules_go_in_a_group_of_their_own() -> None:
    extra = [{"alert": "MailQueueIdle", "expr": 'absent(pinledger_jobs_total{queue="mail"})'}]
    manifests = helm.template(
        values_of("production"), set_json={"prometheusRule.extraRules": extra}
    )
    groups = one(manifests, "PrometheusRule")["spec"]["groups"]
    assert groups == [*rules.groups(), {"name": "pinledger.extra", "rules": extra}]


def test_the_service_monitor_scrapes_under_the_job_the_rules_select() -> None:
    manifests = rendered("production")
    monitor = one(manifests, "ServiceMonitor")
    (admin,) = [
        s for s in of_kind(manifests, "Service") if s["metadata"]["name"].endswith("-admin")
    ]
    # The Prometheus Operator takes the job from this label of the Service.
    job = admin["metadata"]["labels"][monitor["spec"]["jobLabel"]]
    (server_down,) = [r for r in rules.alerts() if r["alert"] == "PinledgerServerDown"]
    assert server_down["expr"] == f'up{{job="{job}"}} == 0'


def test_the_notes_say_what_to_do_when_a_migration_needs_a_pause() -> None:
    text = helm.notes()
    assert f"scale deployment/{helm.RELEASE}-pinledger --replicas=0" in text
    assert "--set migrate.allowPause=true" in text
    assert "create secret generic pinledger-store" in text
    paused = helm.notes(sets={"migrate.allowPause": "true"})
    assert "every server must be stopped" in paused
