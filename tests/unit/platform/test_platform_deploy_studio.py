"""A studio table's device bridge is deployed like the other services, and only when asked.

deploy/k8s-studio is a kustomize overlay of deploy/k8s: the bridge's Deployment and Service
(held to the code with the others' in test_platform_deploy.py), its own Secrets, and patches
of the setup Jobs so `db setup` provisions its role and schema and kafka-setup makes its SCRAM
user. compose.yaml runs it behind the `studio` profile, with two one-shots of its own. Without
the overlay or the profile, nothing of the bridge runs. Nothing here runs kustomize, a cluster
or Docker (tests/integration/platform/test_platform_deploy_setup.py renders the overlay with
`kubectl kustomize` when it is installed).
"""

from __future__ import annotations

import json
from typing import Any

from services.dev.infra.kafka_acls import project_principals
from services.dev.infra.kafka_setup_script import password_variable
from services.shared.platform.settings import Settings
from services.studio_bridge.service import device_link
from services.tools.admin.provisioning import store_roles
from services.tools.cli.db_cmd import PASSWORD_VARIABLE, SERVICES, STUDIO_BRIDGE
from tests.unit.platform.test_platform_deploy import (
    BRIDGE,
    K8S,
    STUDIO,
    compose_services,
    container,
    environment_of,
    find,
    kustomization,
    load_all,
    secret_env,
)
from tests.unit.platform.test_platform_deploy_setup import raw_environment, variable_of

BRIDGE_ROLE = store_roles([BRIDGE])[0]
"""The schema and roles `db setup --services studio-bridge` makes: login ``studio_bridge``."""
STUDIO_STEPS = {"db-setup-studio", "keys-studio", BRIDGE}
"""What compose's `studio` profile adds."""


def patched_job(name: str) -> dict[str, Any]:
    """The base's Job's container with the overlay's patch merged as kustomize's strategic
    merge does: the container matched by name, its fields replaced, its env merged by name."""
    [main] = find("Job", name)["spec"]["template"]["spec"]["containers"]
    [patch] = [
        doc
        for item in kustomization(STUDIO)["patches"]
        for doc in load_all(STUDIO / item["path"])
        if doc["kind"] == "Job" and doc["metadata"]["name"] == name
    ]
    [change] = patch["spec"]["template"]["spec"]["containers"]
    assert change["name"] == main["name"]
    env = {variable["name"]: variable for variable in main.get("env", [])}
    env |= {variable["name"]: variable for variable in change.get("env", [])}
    return {**main, **change, "env": list(env.values())}


def test_the_overlay_builds_on_the_single_instance_set_and_the_base_runs_no_bridge() -> None:
    spec = kustomization(STUDIO)
    assert spec["resources"][0] == "../k8s"
    assert (STUDIO / "../k8s/kustomization.yaml").resolve() == (K8S / "kustomization.yaml")
    assert spec["namespace"] == kustomization()["namespace"]
    assert spec["labels"] == kustomization()["labels"]
    for name in spec["resources"][1:]:
        assert (STUDIO / name).is_file(), name
    for item in spec["patches"]:
        for doc in load_all(STUDIO / item["path"]):
            find(doc["kind"], doc["metadata"]["name"])  # a patch of something the base has
    base = [doc for name in kustomization()["resources"] for doc in load_all(K8S / name)]
    assert BRIDGE not in json.dumps(base) and BRIDGE_ROLE.login not in json.dumps(base)
    assert STUDIO_BRIDGE == BRIDGE and BRIDGE not in SERVICES  # db setup's default leaves it out


def test_the_bridge_pod_serves_its_table_as_its_own_role_and_principal() -> None:
    settings = Settings.from_env(BRIDGE, environment_of(BRIDGE))
    assert not settings.partitioned and settings.postgres_create_tables is False
    role = secret_env(f"punto-banco-postgres-{BRIDGE}")["POSTGRES_USER"]
    assert settings.postgres.user == role == BRIDGE_ROLE.login == "studio_bridge"
    assert settings.postgres_schema == BRIDGE_ROLE.schema
    assert settings.kafka_auth.username == BRIDGE and project_principals()[BRIDGE] == BRIDGE
    link = device_link(settings)  # every PB_STUDIO_* it needs is set, and valid
    assert (link.table_id, link.device, link.port) == ("studio-1", "shoe-1", 40211)
    [main] = find("Deployment", BRIDGE)["spec"]["template"]["spec"]["containers"]
    assert main["command"] == ["punto-banco", "serve", BRIDGE] and container(BRIDGE) == main
    mounted = json.dumps(find("Deployment", BRIDGE))
    for other in ("admin", "auditor", "shoe", "dealing", "settlement", "gateway"):
        assert f"punto-banco-postgres-{other}" not in mounted
        assert f"punto-banco-kafka-{other}" not in mounted


def test_the_setup_jobs_provision_the_bridge_with_the_passwords_it_reads() -> None:
    db_setup = patched_job("db-setup")
    command = db_setup["command"]
    assert command[:4] == ["punto-banco", "db", "setup", "--services"]
    assert command[4].split(",") == [*SERVICES, BRIDGE]  # the default's, and the bridge
    env = {variable["name"]: variable for variable in db_setup["env"]}
    password = env[PASSWORD_VARIABLE + BRIDGE_ROLE.login.upper()]["valueFrom"]["secretKeyRef"]
    assert password == {"name": f"punto-banco-postgres-{BRIDGE}", "key": "POSTGRES_PASSWORD"}
    [base] = find("Job", "db-setup")["spec"]["template"]["spec"]["containers"]
    assert [variable for variable in base["env"] if env[variable["name"]] != variable] == []
    kafka_setup = patched_job("kafka-setup")
    env = {variable["name"]: variable for variable in kafka_setup["env"]}
    scram = env[password_variable(BRIDGE)]["valueFrom"]["secretKeyRef"]
    assert scram == {"name": f"punto-banco-kafka-{BRIDGE}", "key": "KAFKA_SASL_PASSWORD"}
    assert secret_env(f"punto-banco-kafka-{BRIDGE}")["KAFKA_SASL_USERNAME"] == BRIDGE


def test_compose_runs_the_bridge_behind_the_studio_profile_after_its_own_setup() -> None:
    services = compose_services()
    assert {name for name, each in services.items() if "studio" in each.get("profiles", [])} == (
        STUDIO_STEPS
    )
    for name, each in services.items():  # a plain `up` waits for none of them
        if name not in STUDIO_STEPS:
            assert not STUDIO_STEPS & set(each.get("depends_on", [])), name
    # Its schema and role: `db setup --services studio-bridge` as the administrator, after
    # db-setup (one provisioning at a time), with the password the bridge logs in with.
    setup = services["db-setup-studio"]
    assert setup["command"] == ["punto-banco", "db", "setup", "--services", BRIDGE]
    assert setup["depends_on"]["db-setup"]["condition"] == "service_completed_successfully"
    raw = raw_environment(BRIDGE)
    setup_env = raw_environment("db-setup-studio")
    assert setup_env["POSTGRES_PASSWORD"] == raw_environment("postgres")["POSTGRES_PASSWORD"]
    assert variable_of(raw["POSTGRES_PASSWORD"]) == variable_of(
        setup_env[PASSWORD_VARIABLE + BRIDGE_ROLE.login.upper()]
    )
    assert variable_of(raw["KAFKA_SASL_PASSWORD"]) == variable_of(
        raw_environment("kafka")[password_variable(BRIDGE)]
    )
    # Its key: `keys init --services studio-bridge` into the keys volume, after keys (one
    # writer of the keyring at a time); the bridge mounts its own folder and the keyring.
    keys = services["keys-studio"]
    assert keys["command"] == [  # its key signs its table's reads only
        *("punto-banco", "keys", "init", "--services", BRIDGE),
        *("--tables", "studio-1"),  # PB_STUDIO_TABLE, else studio-1
    ]
    assert keys["depends_on"]["keys"]["condition"] == "service_completed_successfully"
    assert keys["volumes"] == services["keys"]["volumes"]
    made = Settings.from_env(BRIDGE, {k: str(v) for k, v in keys["environment"].items()})
    own = next(v for v in services[BRIDGE]["volumes"] if v["target"] == "/run/keys/own")
    assert made.signing_key_path.parent.name == own["volume"]["subpath"] == BRIDGE
    assert all(v["read_only"] for v in services[BRIDGE]["volumes"])
    # The bridge: its own role and principal, provisioned, its table and device from .env.
    bridge = services[BRIDGE]
    for step in ("kafka-setup", "db-setup-studio", "keys-studio"):
        assert bridge["depends_on"][step]["condition"] == "service_completed_successfully"
    env = {key: str(value) for key, value in bridge["environment"].items()}
    device = {"PB_STUDIO_DEVICE_HOST": "192.0.2.10", "PB_STUDIO_DEVICE_PORT": "40211"}
    settings = Settings.from_env(BRIDGE, {**env, **device})
    assert settings.postgres.user == BRIDGE_ROLE.login and not settings.postgres_create_tables
    assert settings.kafka_auth.username == BRIDGE
    link = device_link(settings)
    assert (link.table_id, link.host, link.port) == ("studio-1", "192.0.2.10", 40211)
    assert {raw[name] for name in device} == {f"${{{name}:-}}" for name in device}
