"""The shipped deployments use least privilege, and agree with the code (issue 20, item 3).

deploy/k8s (and its partitioned overlay) and deploy/compose.yaml give each service its own
PostgreSQL role and Kafka principal, from a Secret (or .env value) no other service gets;
`punto-banco db setup` (the db-setup Job / one-shot) provisions the roles, schemas and
triggers as the administrator, and the services run with PB_POSTGRES_CREATE_TABLES=no; the
compose broker authenticates (deploy/kafka/compose-broker.sh: SCRAM users at format time; run
for real in tests/integration/infra/test_infra_compose_broker.py) and kafka-setup.sh, rendered
from kafka_acls.py, grants exactly the matrix `infra up` grants, makes the topics and sets the
gateways' quotas (run here against stand-ins of Kafka's tools). With kubectl installed, the
manifests are also rendered (`kubectl kustomize`) and read back.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts import HOUSE, operator_topics
from services.dev.infra.kafka_acls import (
    GATEWAY_QUOTA,
    consumer_group,
    project_acls,
    project_principals,
)
from services.dev.infra.kafka_admin import AclBinding, AclOperation, PatternType, ResourceType
from services.dev.infra.kafka_auth import ADMIN
from services.dev.infra.kafka_setup_script import setup_script
from services.shared.platform.kafka import PROJECT_TOPICS, topic_config
from services.shared.platform.settings import Settings
from services.tools.cli.db_cmd import PASSWORD_VARIABLE
from tests.unit.platform.test_platform_deploy import (
    DEPLOY,
    DEPLOYED,
    K8S,
    SERVICES,
    compose_services,
    container,
    environment_of,
    find,
    kustomization,
    load_all,
    resources,
    secret_env,
)
from tests.unit.platform.test_platform_deploy_partitioned import OVERLAY, patch

SETUP_SCRIPT = K8S / "kafka-setup.sh"
BROKER_SCRIPT = DEPLOY / "kafka" / "compose-broker.sh"
ROLES = (*DEPLOYED, "auditor")
"""The LOGIN roles `db setup` makes: each service's (the gateway's), and the auditor's."""


# ---- Kafka: kafka-setup.sh ---------------------------------------------------------------


def test_the_setup_script_is_the_one_rendered_from_the_matrix() -> None:
    assert SETUP_SCRIPT.read_text() == setup_script((HOUSE,)), (
        "render it again: punto-banco infra kafka-script > deploy/k8s/kafka-setup.sh"
    )
    assert os.access(SETUP_SCRIPT, os.X_OK)


def run_setup(tmp_path: Path, env: dict[str, str], operators: tuple[str, ...] = (HOUSE,)) -> Any:
    """Run the script for ``operators`` against stand-ins of Kafka's three tools; the calls."""
    tools = tmp_path / "bin"
    tools.mkdir(parents=True)
    log = tmp_path / "calls.jsonl"
    stand_in = (
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "files = {a: open(args[i + 1]).read() for i, a in enumerate(args) if a.endswith('-file')}\n"
        f"with open({str(log)!r}, 'a') as out:\n"
        "    out.write(json.dumps([os.path.basename(sys.argv[0]), args, files]) + '\\n')\n"
    )
    for name in ("kafka-topics.sh", "kafka-acls.sh", "kafka-configs.sh"):
        (tools / name).write_text(stand_in)
        (tools / name).chmod(0o755)
    script = tmp_path / "kafka-setup.sh"
    script.write_text(setup_script(operators))
    result = subprocess.run(
        ["sh", str(script)],
        env={"PATH": os.environ["PATH"], "KAFKA_BIN": str(tools), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def option(args: list[str], name: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == name]


ADMIN_ENV = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka:19092",
    "KAFKA_SASL_USERNAME": ADMIN,
    "KAFKA_SASL_PASSWORD": "admin-secret",
}


@pytest.mark.parametrize("operators", [(HOUSE,), (HOUSE, "acme")])
def test_the_setup_script_grants_the_matrix_infra_grants_and_nothing_else(
    tmp_path: Path, operators: tuple[str, ...]
) -> None:
    env = {
        **ADMIN_ENV,
        "PB_OPERATORS": ",".join(operators),
        "PB_TOPIC_PREFIX": "run7.",
        "PB_TOPIC_PARTITIONS": "12",
        "PB_KAFKA_PASSWORD_SHOE": "shoe-secret",
    }
    result, calls = run_setup(tmp_path, env, operators)
    assert result.returncode == 0, result.stderr
    granted = set()
    for tool, args, _files in calls:
        assert option(args, "--bootstrap-server") == ["kafka:19092"]
        if tool != "kafka-acls.sh":
            continue
        [principal], [operation] = option(args, "--allow-principal"), option(args, "--operation")
        pattern = PatternType.PREFIXED if "prefixed" in args else PatternType.LITERAL
        for kind, flag in ((ResourceType.TOPIC, "--topic"), (ResourceType.GROUP, "--group")):
            for name in option(args, flag):
                granted.add(
                    AclBinding(kind, name, pattern, principal, AclOperation[operation.upper()])
                )
    assert granted == set(project_acls("run7.", "run7.", operators=operators))
    topics = {
        option(args, "--topic")[0]: (option(args, "--partitions"), option(args, "--config"))
        for tool, args, _files in calls
        if tool == "kafka-topics.sh"
    }
    wanted = dict.fromkeys((*PROJECT_TOPICS, *operator_topics(operators)))
    assert topics == {
        f"run7.{topic}": (["12"], [f"{k}={v}" for k, v in topic_config(topic).items()])
        for topic in wanted
    }
    configs = [args for tool, args, _files in calls if tool == "kafka-configs.sh"]
    quotas = {option(a, "--entity-name")[0]: option(a, "--add-config") for a in configs}
    gateways = [name for name, role in project_principals(operators).items() if role == "gateway"]
    expected = f"producer_byte_rate={GATEWAY_QUOTA.producer_byte_rate},request_percentage=50"
    # Only the shoe's password was given: its credential is set, nobody else's is touched.
    assert quotas == {"shoe": [], **{name: [expected] for name in gateways}}
    [scram] = [files for tool, args, files in calls if "--add-config-file" in args]
    assert list(scram.values()) == ["SCRAM-SHA-512=[iterations=8192,password=shoe-secret]\n"]


def test_the_setup_script_refuses_other_operators_and_runs_without_a_gateway_rate(
    tmp_path: Path,
) -> None:
    other, calls = run_setup(tmp_path, {**ADMIN_ENV, "PB_OPERATORS": "house,acme"})
    assert other.returncode == 2 and calls == []
    assert "kafka-script --operators house,acme" in other.stderr
    unlimited, calls = run_setup(tmp_path / "x", {**ADMIN_ENV, "PB_KAFKA_GATEWAY_BYTE_RATE": "0"})
    assert unlimited.returncode == 0, unlimited.stderr
    gateway = [args for tool, args, _f in calls if option(args, "--entity-name") == ["gateway"]]
    assert [option(a, "--delete-config") for a in gateway] == [["producer_byte_rate"], []]
    assert option(gateway[-1], "--add-config") == ["request_percentage=50"]


# ---- compose -----------------------------------------------------------------------------


def compose_env(service: str) -> dict[str, str]:
    return {key: str(value) for key, value in compose_services()[service]["environment"].items()}


def variable_of(value: str) -> str:
    """The .env variable a compose value comes from (``${NAME:?...}``), from the raw file."""
    [name] = re.findall(r"\$\{(\w+):\?", value)
    return name


def raw_environment(service: str) -> dict[str, str]:
    [compose] = load_all(DEPLOY / "compose.yaml")
    env: dict[str, str] = compose["services"][service]["environment"]
    return env


@pytest.mark.parametrize("service", DEPLOYED)
def test_compose_runs_each_service_as_its_own_role_and_principal(service: str) -> None:
    settings = Settings.from_env(service, compose_env(service))
    assert settings.persistence == "postgres" and settings.postgres_create_tables is False
    assert settings.postgres.user == service and settings.kafka_auth.username == service
    assert settings.kafka_auth.protocol == "SASL_PLAINTEXT"
    raw = raw_environment(service)
    setup = raw_environment("db-setup")
    # Its role's password is the one db-setup gives that role; its principal's the broker's.
    assert variable_of(raw["POSTGRES_PASSWORD"]) == variable_of(
        setup[PASSWORD_VARIABLE + service.upper()]
    )
    assert variable_of(raw["KAFKA_SASL_PASSWORD"]) == variable_of(
        raw_environment("kafka")[f"PB_KAFKA_PASSWORD_{service.upper()}"]
    )
    depends = compose_services()[service]["depends_on"]
    for step in ("db-setup", "kafka-setup", "keys"):
        assert depends[step]["condition"] == "service_completed_successfully"


def test_compose_provisions_the_store_and_the_broker_as_their_administrators() -> None:
    services = compose_services()
    setup = services["db-setup"]
    assert setup["command"] == ["punto-banco", "db", "setup"]
    admin = raw_environment("postgres")["POSTGRES_PASSWORD"]
    assert raw_environment("db-setup")["POSTGRES_PASSWORD"] == admin
    assert {PASSWORD_VARIABLE + role.upper() for role in ROLES} <= set(setup["environment"])
    for service in DEPLOYED:  # the administrator's password reaches no service
        assert variable_of(admin) not in json.dumps(raw_environment(service))
    # The broker: a SCRAM user per principal of the matrix, made at format time.
    broker = services["kafka"]
    names = re.search(r'^principals="([^"]*)"', BROKER_SCRIPT.read_text(), re.M)
    assert names is not None and names.group(1).split() == [ADMIN, *project_principals()]
    assert {f"PB_KAFKA_PASSWORD_{n.upper()}" for n in names.group(1).split()} == set(
        broker["environment"]
    )
    assert "./kafka/compose-broker.sh:/etc/punto-banco/compose-broker.sh:ro" in broker["volumes"]
    assert broker["entrypoint"] == ["sh", "/etc/punto-banco/compose-broker.sh"]
    # kafka-setup runs the rendered script as the admin before any service starts.
    kafka_setup = services["kafka-setup"]
    assert "./k8s/kafka-setup.sh:/etc/punto-banco/kafka-setup.sh:ro" in kafka_setup["volumes"]
    assert kafka_setup["environment"]["KAFKA_SASL_USERNAME"] == ADMIN
    assert kafka_setup["image"] == broker["image"]
    # Every secret compose reads is in env.example, and .env stays out of git.
    raw = (DEPLOY / "compose.yaml").read_text()
    example = (DEPLOY / "env.example").read_text()
    assert set(re.findall(r"\$\{(\w+):\?", raw)) == set(re.findall(r"^(\w+)=", example, re.M))
    assert ".env" in (DEPLOY / ".gitignore").read_text().split()


# ---- Kubernetes --------------------------------------------------------------------------


@pytest.mark.parametrize("service", DEPLOYED)
def test_each_pod_holds_its_own_postgres_role_and_runs_provisioned(service: str) -> None:
    settings = Settings.from_env(service, environment_of(service))
    assert settings.postgres_create_tables is False
    assert settings.postgres.user == service
    secrets = {s["secretRef"]["name"] for s in container(service)["envFrom"] if "secretRef" in s}
    assert secrets == {f"punto-banco-postgres-{service}", f"punto-banco-kafka-{service}"}
    mounted = json.dumps(find("Deployment", service))
    for other in ("admin", "auditor", *(s for s in DEPLOYED if s != service)):
        assert f"punto-banco-postgres-{other}" not in mounted


def job_env(name: str, overlay: bool = False) -> dict[str, str]:
    """A Job's environment as the kubelet makes it: ConfigMap (the overlay's patch with
    ``overlay``), Secrets (their examples), then its env (secretKeyRef: that Secret's key)."""
    [main] = find("Job", name)["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for source in main["envFrom"]:
        if "configMapRef" in source:
            env.update(find("ConfigMap", source["configMapRef"]["name"])["data"])
            if overlay:
                env.update(patch("ConfigMap", "punto-banco-config")["data"])
        else:
            env.update(secret_env(source["secretRef"]["name"]))
    for variable in main.get("env", []):
        if "valueFrom" in variable:
            ref = variable["valueFrom"]["secretKeyRef"]
            env[variable["name"]] = f"<{ref['name']}:{ref['key']}>"
        else:
            env[variable["name"]] = variable["value"]
    return env


def test_the_db_setup_job_provisions_every_role_with_the_password_its_service_reads() -> None:
    job = find("Job", "db-setup")
    [main] = job["spec"]["template"]["spec"]["containers"]
    assert main["command"] == ["punto-banco", "db", "setup"]
    env = job_env("db-setup")
    assert env["POSTGRES_USER"] == secret_env("punto-banco-postgres-admin")["POSTGRES_USER"]
    for role in ROLES:
        assert (
            env[PASSWORD_VARIABLE + role.upper()]
            == f"<punto-banco-postgres-{role}:POSTGRES_PASSWORD>"
        )
        assert secret_env(f"punto-banco-postgres-{role}")["POSTGRES_USER"] == role
    settings = Settings.from_env("shoe", env)
    assert settings.persistence == "postgres" and not settings.partitioned
    # With the partitioned overlay's config, db setup provisions every partition's schema.
    partitioned = Settings.from_env("shoe", job_env("db-setup", overlay=True))
    assert partitioned.partitioned and partitioned.topic_partitions == 12
    assert {"Job"} <= {doc["kind"] for doc in resources()}


def test_the_kafka_setup_job_runs_the_rendered_script_as_the_clusters_admin() -> None:
    job = find("Job", "kafka-setup")
    spec = job["spec"]["template"]["spec"]
    [main] = spec["containers"]
    assert main["image"] == compose_services()["kafka"]["image"]
    [item] = [
        i for i in kustomization()["configMapGenerator"] if i["name"] == "punto-banco-kafka-setup"
    ]
    assert item["files"] == ["kafka-setup.sh"]
    [script] = [v for v in spec["volumes"] if v["name"] == "script"]
    mount = next(m for m in main["volumeMounts"] if m["name"] == "script")
    assert script["configMap"]["name"] == item["name"]
    assert main["command"] == ["sh", f"{mount['mountPath']}/kafka-setup.sh"]
    env = job_env("kafka-setup")
    assert env["KAFKA_SASL_USERNAME"] == ADMIN and env["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    for service in DEPLOYED:
        key = f"<punto-banco-kafka-{service}:KAFKA_SASL_PASSWORD>"
        assert env[f"PB_KAFKA_PASSWORD_{service.upper()}"] == key
    assert "PB_OPERATORS" in env and env["PB_OPERATORS"] == HOUSE  # the script's operators


def test_the_services_groups_are_the_ones_the_script_grants() -> None:
    for service in SERVICES:
        settings = Settings.from_env(service, environment_of(service))
        assert settings.consumer_group == consumer_group(service, settings.topic_prefix)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("folder", ["k8s", "k8s-partitioned"])
def test_the_rendered_manifests_give_each_pod_only_its_own_secrets(
    tmp_path: Path, folder: str
) -> None:
    """`kubectl kustomize` with placeholder keys and .env files (the examples): every Secret
    reference resolves to a generated Secret, and each service's pod references its own."""
    shutil.copytree(K8S, tmp_path / "k8s")
    shutil.copytree(OVERLAY, tmp_path / "k8s-partitioned")
    base = tmp_path / "k8s"
    for example in base.glob("*.env.example"):
        shutil.copy(example, base / example.name.removesuffix(".example"))
    placeholders = ("keys/shoe.pem", "keys/dealing.pem", "keys/settlement.pem", "keys/gateway.pem")
    for name in (*placeholders, "keys/operators/house.json", "kafka/ca.pem"):
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text("placeholder\n")
    for name in ("shoe-secret.json", "keyring.json", "supervisors.json"):
        (base / "keys" / name).write_text("{}\n")
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path / folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    docs = [doc for doc in yaml.safe_load_all(rendered.stdout) if doc]
    secrets = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "Secret"}

    def referenced(doc: dict[str, Any]) -> set[str]:
        text = json.dumps(doc)
        return {name for name in secrets if f'"{name}"' in text}

    for doc in docs:
        if doc["kind"] == "Deployment":
            service = doc["metadata"]["name"]
            own = {name.rsplit("-", 1)[0] for name in referenced(doc)}
            assert own == {
                f"punto-banco-postgres-{service}",
                f"punto-banco-kafka-{service}",
                f"punto-banco-signing-{service}",
                *(["punto-banco-shoe-secret"] if service == "shoe" else []),
                *(["punto-banco-gateway-operators"] if service == "gateway" else []),
            }
            env = {
                e["name"]: e.get("value")
                for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]
            }
            assert "POSTGRES_PASSWORD" not in env
    jobs = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "Job"}
    assert set(jobs) == {"db-setup", "kafka-setup"}
    admin_secrets = {"punto-banco-postgres-admin", "punto-banco-kafka-admin"}
    assert {n.rsplit("-", 1)[0] for n in referenced(jobs["db-setup"])} >= {
        "punto-banco-postgres-admin"
    }
    for doc in docs:
        if doc["kind"] == "Deployment":
            assert not {n.rsplit("-", 1)[0] for n in referenced(doc)} & admin_secrets
