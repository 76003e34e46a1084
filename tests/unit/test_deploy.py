"""The deployment files (Dockerfile, compose.yaml, deploy/systemd, deploy/k8s) hold together
with the code: every command and flag they run is one `tickwork` has, every TICKWORK_*
variable is a setting, and every health check asks the port and path that serve /healthz.
docs/deploy.md says what else was checked, with which tools."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tickwork.api import create_app
from tickwork.api.process import create_process_app
from tickwork.config import ENV_VARS, NOT_SETTINGS

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
SYSTEMD = ROOT / "deploy" / "systemd"
COMMANDS = {"run", "scheduler", "worker", "api", "migrate"}
TICKWORK = Path(sys.executable).with_name("tickwork")


@cache
def help_of(command: str) -> str:
    """`tickwork COMMAND --help`, from the installed script: whatever parses the arguments."""
    done = subprocess.run([str(TICKWORK), command, "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"tickwork {command} --help: {done.stderr}"
    return done.stdout


def check_command(argv: list[str], where: str) -> None:
    """``argv`` (after ``tickwork``) names a real command, and each of its flags exists."""
    assert argv, f"{where}: no command"
    command, rest = argv[0], argv[1:]
    assert command in COMMANDS, f"{where}: tickwork {command} is not a process command"
    text = help_of(command)
    for arg in rest:
        if arg.startswith("--"):
            flag = arg.split("=", 1)[0]
            assert re.search(rf"{re.escape(flag)}\b", text), f"{where}: tickwork {command} " \
                f"has no {flag}"


def check_env(names: list[str], where: str) -> None:
    for name in names:
        if name.startswith("TICKWORK_"):
            assert name in ENV_VARS or name in NOT_SETTINGS, f"{where}: {name} is no setting"


def has_healthz(app: Any) -> bool:
    return any(getattr(route, "path", None) == "/healthz" for route in app.routes)


def test_every_process_serves_healthz() -> None:
    assert has_healthz(create_app(client=None))  # type: ignore[arg-type]  # routes only
    assert has_healthz(create_process_app(face=None))  # type: ignore[arg-type]


# -- Dockerfile ------------------------------------------------------------------------------

def test_the_image_is_multi_stage_non_root_and_checks_its_health() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(froms) == 2
    assert all(re.fullmatch(r"python:3\.\d+-slim", f) for f in froms)
    assert "pip wheel" in text
    assert "--no-index --find-links /wheels" in text
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user
    assert user[-1] not in ("root", "0")
    env = dict(re.findall(r"(TICKWORK_[A-Z_]+)=(\S+)", text))
    check_env(list(env), "Dockerfile")
    # one port for every role: the API's, and a scheduler's or worker's /healthz
    assert env["TICKWORK_PORT"] == "8000"
    assert env["TICKWORK_METRICS_ADDRESS"] == "0.0.0.0:8000"
    (health,) = re.findall(r"^HEALTHCHECK .*?CMD (.*)$", text, re.M | re.S)
    assert "http://127.0.0.1:8000/healthz" in health
    assert re.search(r"^EXPOSE 8000$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["tickwork"\]$', text, re.M)
    (cmd,) = re.findall(r"^CMD (\[.*\])$", text, re.M)
    check_command(yaml.safe_load(cmd), "Dockerfile CMD")


# -- compose.yaml ----------------------------------------------------------------------------

def test_compose_runs_the_migration_once_before_every_process() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "scheduler", "worker", "api"} <= services.keys()
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["scheduler"]["deploy"]["replicas"] == 2
    for name in ("scheduler", "worker", "api"):
        service = services[name]
        check_command(service["command"], f"compose {name}")
        check_env(list(service["environment"]), f"compose {name}")
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert service["environment"]["TICKWORK_DATABASE_URL"].startswith("postgresql://")
        assert "@postgres:5432/" in service["environment"]["TICKWORK_DATABASE_URL"]
        assert service["environment"]["TICKWORK_REDIS_URL"].startswith("redis://redis:")
        assert service["build"] == "."
    assert services["api"]["ports"] == ["127.0.0.1:8000:8000"]
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"][0] == "CMD"


# -- systemd ---------------------------------------------------------------------------------

def unit(name: str) -> dict[str, list[str]]:
    """A unit file's settings, each name with all its values (names may repeat)."""
    found: dict[str, list[str]] = {}
    for line in (SYSTEMD / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


HARDENING = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
             "PrivateTmp": "yes", "PrivateDevices": "yes", "RestrictSUIDSGID": "yes",
             "CapabilityBoundingSet": "", "LockPersonality": "yes"}


@pytest.mark.parametrize(("name", "command"), [
    ("tickwork-scheduler.service", "scheduler"), ("tickwork-worker@.service", "worker"),
    ("tickwork-api.service", "api")])
def test_systemd_units_run_real_commands_hardened(name: str, command: str) -> None:
    settings = unit(name)
    for line in settings.get("ExecStartPre", []) + settings["ExecStart"]:
        argv = shlex.split(line)
        assert argv[0] == "/opt/tickwork/bin/tickwork"
        check_command(argv[1:], name)
    assert shlex.split(settings["ExecStart"][0])[1] == command
    envs = [pair.split("=", 1)[0] for value in settings.get("Environment", [])
            for pair in shlex.split(value)]
    check_env(envs, name)
    assert settings["User"] == ["tickwork"]
    assert settings["KillSignal"] == ["SIGTERM"]
    for key, value in HARDENING.items():
        assert settings.get(key) == [value], f"{name}: {key}"


# -- Kubernetes ------------------------------------------------------------------------------

def manifests() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc.get("kind") != "Kustomization":
                found[doc["kind"], doc["metadata"]["name"]] = doc
    return found


def test_kubernetes_manifests_probe_healthz_and_read_the_secret() -> None:
    objects = manifests()
    secret = objects["Secret", "tickwork"]
    check_env(list(secret["stringData"]), "Secret")
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    assert sorted(kustomization["resources"]) == sorted(p.name for p in K8S.glob("*.yaml")
                                                       if p.name != "kustomization.yaml")
    pods = {name: objects["Deployment", f"tickwork-{name}"]["spec"]["template"]
            for name in ("scheduler", "worker", "api")}
    pods["migrate"] = objects["Job", "tickwork-migrate"]["spec"]["template"]
    for name, pod in pods.items():
        deployment = objects.get(("Deployment", f"tickwork-{name}"))
        if deployment is not None:
            assert deployment["spec"]["selector"]["matchLabels"].items() <= \
                pod["metadata"]["labels"].items()
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        (container,) = pod["spec"]["containers"]
        check_command(container["args"], f"k8s {name}")
        assert container["args"][0] == name
        assert container["envFrom"] == [{"secretRef": {"name": "tickwork"}}]
        env = {e["name"]: e["value"] for e in container.get("env", [])}
        check_env(list(env), f"k8s {name}")
        if name == "migrate":
            assert "livenessProbe" not in container
            continue
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["http"] == 8000
        # the process listens where the probe asks: the API on host:port, the others on
        # their metrics address
        if name == "api":
            assert env["TICKWORK_HOST"] == "0.0.0.0"
            assert env["TICKWORK_PORT"] == "8000"
        else:
            assert env["TICKWORK_METRICS_ADDRESS"] == "0.0.0.0:8000"
        for probe in ("livenessProbe", "readinessProbe"):
            assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    service = objects["Service", "tickwork-api"]
    assert service["spec"]["selector"] == pods["api"]["metadata"]["labels"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"
