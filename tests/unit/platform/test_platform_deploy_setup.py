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

import pytest

from contracts import HOUSE
from services.dev.infra.kafka_acls import (
    consumer_group,
    project_principals,
)
from services.dev.infra.kafka_auth import ADMIN
from services.dev.infra.kafka_setup_script import setup_script
from services.shared.platform.settings import Settings
from services.tools.cli.db_cmd import PASSWORD_VARIABLE
from tests.unit.platform.test_platform_deploy import (
    DEPLOY,
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
from tests.unit.platform.test_platform_deploy_partitioned import patch

SETUP_SCRIPT = K8S / "kafka-setup.sh"
BROKER_SCRIPT = DEPLOY / "kafka" / "compose-broker.sh"
ROLES = (*SERVICES, "auditor")
"""The LOGIN roles `db setup` makes: each service's and the auditor's."""


# ---- Kafka: kafka-setup.sh ---------------------------------------------------------------


def test_the_setup_script_is_the_one_rendered_from_the_matrix() -> None:
    assert SETUP_SCRIPT.read_text() == setup_script((HOUSE,)), (
        "render it again: punto-banco infra kafka-script > deploy/k8s/kafka-setup.sh"
    )
    assert os.access(SETUP_SCRIPT, os.X_OK)


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


@pytest.mark.parametrize("service", SERVICES)
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
    for service in SERVICES:  # the administrator's password reaches no service
        assert variable_of(admin) not in json.dumps(raw_environment(service))
    # The broker: a SCRAM user per principal of the matrix, made at format time.
    broker = services["kafka"]
    names = re.search(r'^principals="([^"]*)"', BROKER_SCRIPT.read_text(), re.M)
    assert names is not None and names.group(1).split() == [ADMIN, *project_principals()]
    assert {
        f"PB_KAFKA_PASSWORD_{n.upper().replace('-', '_')}" for n in names.group(1).split()
    } == set(broker["environment"])
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


@pytest.mark.parametrize("service", SERVICES)
def test_each_pod_holds_its_own_postgres_role_and_runs_provisioned(service: str) -> None:
    settings = Settings.from_env(service, environment_of(service))
    assert settings.postgres_create_tables is False
    assert settings.postgres.user == service
    secrets = {s["secretRef"]["name"] for s in container(service)["envFrom"] if "secretRef" in s}
    assert secrets == {f"punto-banco-postgres-{service}", f"punto-banco-kafka-{service}"}
    mounted = json.dumps(find("Deployment", service))
    for other in ("admin", "auditor", *(s for s in SERVICES if s != service)):
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
    for service in SERVICES:
        key = f"<punto-banco-kafka-{service}:KAFKA_SASL_PASSWORD>"
        assert env[f"PB_KAFKA_PASSWORD_{service.upper()}"] == key
    assert "PB_OPERATORS" in env and env["PB_OPERATORS"] == HOUSE  # the script's operators


def test_the_services_groups_are_the_ones_the_script_grants() -> None:
    for service in SERVICES:
        settings = Settings.from_env(service, environment_of(service))
        assert settings.consumer_group == consumer_group(service, settings.topic_prefix)
