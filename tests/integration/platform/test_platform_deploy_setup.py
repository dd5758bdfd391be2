"""The deploy set-up script run, and the manifests rendered, by real processes."""

from __future__ import annotations

import json
import os
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
    project_acls,
    project_principals,
)
from services.dev.infra.kafka_admin import AclBinding, AclOperation, PatternType, ResourceType
from services.dev.infra.kafka_auth import ADMIN
from services.dev.infra.kafka_setup_script import setup_script
from services.shared.platform.kafka import PROJECT_TOPICS, topic_config
from tests.unit.platform.test_platform_deploy import (
    K8S,
    STUDIO,
)
from tests.unit.platform.test_platform_deploy_partitioned import OVERLAY


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


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
@pytest.mark.parametrize("folder", ["k8s", "k8s-partitioned", "k8s-studio"])
def test_the_rendered_manifests_give_each_pod_only_its_own_secrets(
    tmp_path: Path, folder: str
) -> None:
    """`kubectl kustomize` with placeholder keys and .env files (the examples): every Secret
    reference resolves to a generated Secret, and each service's pod references its own."""
    shutil.copytree(K8S, tmp_path / "k8s")
    shutil.copytree(OVERLAY, tmp_path / "k8s-partitioned")
    shutil.copytree(STUDIO, tmp_path / "k8s-studio")
    base = tmp_path / "k8s"
    for example in [*base.glob("*.env.example"), *(tmp_path / "k8s-studio").glob("*.env.example")]:
        shutil.copy(example, example.with_name(example.name.removesuffix(".example")))
    (tmp_path / "k8s-studio" / "keys").mkdir(exist_ok=True)
    (tmp_path / "k8s-studio" / "keys" / "studio-bridge.pem").write_text("placeholder\n")
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
    deployments = {doc["metadata"]["name"] for doc in docs if doc["kind"] == "Deployment"}
    assert ("studio-bridge" in deployments) == (folder == "k8s-studio")
    jobs = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "Job"}
    assert set(jobs) == {"db-setup", "kafka-setup"}
    if folder == "k8s-studio":  # the setup Jobs give the bridge its role and its Kafka user
        assert {n.rsplit("-", 1)[0] for n in referenced(jobs["db-setup"])} >= {
            "punto-banco-postgres-studio-bridge"
        }
        assert {n.rsplit("-", 1)[0] for n in referenced(jobs["kafka-setup"])} >= {
            "punto-banco-kafka-studio-bridge"
        }
    admin_secrets = {"punto-banco-postgres-admin", "punto-banco-kafka-admin"}
    assert {n.rsplit("-", 1)[0] for n in referenced(jobs["db-setup"])} >= {
        "punto-banco-postgres-admin"
    }
    for doc in docs:
        if doc["kind"] == "Deployment":
            assert not {n.rsplit("-", 1)[0] for n in referenced(doc)} & admin_secrets
