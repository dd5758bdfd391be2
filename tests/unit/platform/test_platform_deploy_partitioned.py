"""deploy/k8s-partitioned (N pods per service, PB_PARTITIONED) agrees with the code and the base.

The overlay patches deploy/k8s (kustomize): a ConfigMap patch turns every service partitioned
on 12 partitions, a Deployment patch per service sets its replicas and a rolling update.
Nothing here runs kustomize or a cluster: the patches are applied as kustomize's strategic
merge does for what they hold (maps merged key by key; the test checks that they replace no
list of the base), and the result is held to the settings the services read.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.shared.platform.settings import Settings
from tests.unit.platform.test_platform_deploy import (
    DEPLOY,
    K8S,
    SERVICES,
    environment_of,
    find,
    kustomization,
    load_all,
)

OVERLAY = DEPLOY / "k8s-partitioned"


def overlay() -> dict[str, Any]:
    [doc] = load_all(OVERLAY / "kustomization.yaml")
    return doc


def patch(kind: str, name: str) -> dict[str, Any]:
    found = [
        doc
        for item in overlay()["patches"]
        for doc in load_all(OVERLAY / item["path"])
        if doc["kind"] == kind and doc["metadata"]["name"] == name
    ]
    [one] = found
    return one


def merged(base: Any, change: Any, where: str = "") -> Any:
    """``change`` merged into ``base`` the way a strategic merge patch merges maps."""
    if isinstance(base, dict) and isinstance(change, dict):
        out = dict(base)
        for key, value in change.items():
            out[key] = merged(base[key], value, f"{where}.{key}") if key in base else value
        return out
    assert not isinstance(base, list), f"the patch replaces the base's list at {where}"
    return change


def deployment(service: str) -> dict[str, Any]:
    base = find("Deployment", service)
    result: dict[str, Any] = merged(base, patch("Deployment", service))
    return result


def partitioned_env(service: str) -> dict[str, str]:
    """The container's environment with the overlay's ConfigMap patch (envFrom comes first:
    the patch's keys must not be set again by the Secrets or the container's own env)."""
    data = patch("ConfigMap", "punto-banco-config")["data"]
    main = find("Deployment", service)["spec"]["template"]["spec"]["containers"][0]
    assert not set(data) & {variable["name"] for variable in main["env"]}
    return {**environment_of(service), **data}


def test_the_overlay_builds_on_the_single_instance_set_and_patches_what_it_holds() -> None:
    spec = overlay()
    assert spec["resources"][0] == "../k8s"
    assert (OVERLAY / spec["resources"][0] / "kustomization.yaml").resolve() == (
        K8S / "kustomization.yaml"
    ).resolve()
    for name in spec["resources"][1:]:
        assert (OVERLAY / name).is_file(), name
    assert spec["namespace"] == kustomization()["namespace"]
    assert spec["labels"] == kustomization()["labels"]
    for item in spec["patches"]:
        for doc in load_all(OVERLAY / item["path"]):
            find(doc["kind"], doc["metadata"]["name"])  # a patch of something the base has


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_runs_partitioned_on_the_same_twelve_partitions(service: str) -> None:
    settings = Settings.from_env(service, partitioned_env(service))
    assert settings.partitioned is True
    assert settings.topic_partitions == 12
    assert settings.persistence == "postgres"  # a schema per partition: <service>_p<n>
    assert settings.for_partition(11).store_name == f"{service}-p11"
    # The base stays one pod, not partitioned.
    base = Settings.from_env(service, environment_of(service))
    assert base.partitioned is False
    assert find("Deployment", service)["spec"]["replicas"] == 1
    assert find("Deployment", service)["spec"]["strategy"]["type"] == "Recreate"


@pytest.mark.parametrize("service", SERVICES)
def test_replicas_share_the_partitions_evenly_and_roll_one_at_a_time(service: str) -> None:
    spec = deployment(service)["spec"]
    partitions = Settings.from_env(service, partitioned_env(service)).topic_partitions
    replicas = spec["replicas"]
    assert 1 < replicas <= partitions and partitions % replicas == 0
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    # The patch keeps the base's pod: its probes, keys and containers are untouched.
    template = spec["template"]
    assert (
        template["spec"]["containers"]
        == find("Deployment", service)["spec"]["template"]["spec"]["containers"]
    )
    assert template["spec"]["terminationGracePeriodSeconds"] >= 30


@pytest.mark.parametrize("service", SERVICES)
def test_pods_spread_over_machines_and_a_drain_takes_one_at_a_time(service: str) -> None:
    template = deployment(service)["spec"]["template"]
    labels = template["metadata"]["labels"]
    [term] = template["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
    [budget] = [
        doc
        for doc in load_all(OVERLAY / "disruption.yaml")
        if doc["kind"] == "PodDisruptionBudget" and doc["metadata"]["name"] == service
    ]
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
