"""deploy/ agrees with the code: Kubernetes manifests, compose.yaml and the Prometheus configs.

The manifests are deploy/k8s's and the studio overlay's own (deploy/k8s-studio: the device
bridge's Deployment, Service and Secrets; its patches of the setup Jobs are
test_platform_deploy_studio.py's).

Nothing here runs a cluster or a Docker engine (there is none on this machine): the files are
parsed and held to what the code reads (the variables of settings.Environment, the ports of
settings.http_port and the gateway's GatewayConfig, the routes of endpoints.ops_app, the key
and operator files keys.py and operators.py load, the principals of kafka_acls.py, the roles
of `db setup`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from contracts import HOUSE
from services.dev.infra.kafka_acls import consumer_group, project_principals, role_of
from services.gateway.config import DEFAULT_PORT, GatewayConfig
from services.gateway.host import OPS_PATHS
from services.gateway.operators import OperatorKeys, service_name
from services.gateway.service import gateway_settings
from services.shared.platform.host.endpoints import ops_app
from services.shared.platform.settings import HTTP_PORTS, Settings
from services.shared.platform.settings import Settings as Environment
from services.tools.admin.provisioning import store_roles
from services.tools.cli.db_cmd import SERVICES as PROVISIONED

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
K8S = DEPLOY / "k8s"
STUDIO = DEPLOY / "k8s-studio"
SERVICES = ("shoe", "dealing", "settlement")
GATEWAY = "gateway"
BRIDGE = "studio-bridge"
DEPLOYED = (*SERVICES, GATEWAY, BRIDGE)
"""The Deployments: the three table services and the operator gateway (gateway.yaml), and a
studio table's device bridge (deploy/k8s-studio, compose's `studio` profile)."""
PORTS = {
    **{service: HTTP_PORTS[service] for service in (*SERVICES, BRIDGE)},
    GATEWAY: DEFAULT_PORT,
}
"""Each one's HTTP port: the operations endpoints' (the gateway's: its API's too)."""
POD_IP = "10.42.0.7"
HELPER_VARIABLES = {"POD_IP"}  # set by the manifests for other variables to refer to

KNOWN_VARIABLES = (
    {str(field.alias) for field in Environment.model_fields.values()}
    | {"PB_HTTP_PORT"}
    | {f"PB_HTTP_PORT_{name.upper()}" for name in HTTP_PORTS}
)
"""Every variable the processes read (settings.py, settings.http_port)."""


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def kustomization(folder: Path = K8S) -> dict[str, Any]:
    [doc] = load_all(folder / "kustomization.yaml")
    return doc


def resources() -> Iterator[dict[str, Any]]:
    """The base's resources and the studio overlay's own (not its base, ``../k8s``)."""
    for folder in (K8S, STUDIO):
        for name in kustomization(folder)["resources"]:
            if (folder / name).is_file():
                yield from load_all(folder / name)


def generators(kind: str) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The base's and the studio overlay's ``configMapGenerator`` or ``secretGenerator``
    items, each with the folder its files are in."""
    for folder in (K8S, STUDIO):
        for item in kustomization(folder).get(kind, []):
            yield folder, item


def find(kind: str, name: str) -> dict[str, Any]:
    [found] = [
        doc for doc in resources() if doc["kind"] == kind and doc["metadata"]["name"] == name
    ]
    return found


def pod_spec(service: str) -> dict[str, Any]:
    spec: dict[str, Any] = find("Deployment", service)["spec"]["template"]["spec"]
    return spec


def container(service: str) -> dict[str, Any]:
    [main] = pod_spec(service)["containers"]
    return dict(main)


def environment_of(service: str) -> dict[str, str]:
    """The container's environment as the kubelet makes it (ConfigMap, Secret, then env)."""
    main = container(service)
    env: dict[str, str] = {}
    for source in main.get("envFrom", []):
        if "configMapRef" in source:
            env.update(find("ConfigMap", source["configMapRef"]["name"])["data"])
        else:  # a generated Secret: its .env file's example
            env.update(secret_env(source["secretRef"]["name"]))
    for variable in main["env"]:
        if "valueFrom" in variable:
            assert variable["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
            env[variable["name"]] = POD_IP
        else:  # $(NAME) refers to a variable defined before it
            env[variable["name"]] = re.sub(
                r"\$\((\w+)\)", lambda m: env[m.group(1)], variable["value"]
            )
    return env


def secret_env(name: str) -> dict[str, str]:
    """The variables of a Secret kustomization.yaml generates from a .env file (its example)."""
    [(folder, item)] = [(f, i) for f, i in generators("secretGenerator") if i["name"] == name]
    env: dict[str, str] = {}
    for envs in item["envs"]:
        env.update(dotenv(folder / (envs + ".example")))
    return env


def dotenv(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs if not key.startswith("#")}


def generated(kind: str) -> dict[str, list[str]]:
    """The ConfigMaps or Secrets kustomization.yaml generates: name -> file keys (or env keys)."""
    out = {}
    for folder, item in generators(kind):
        keys = [entry.split("=", 1)[0] for entry in item.get("files", [])]
        for envs in item.get("envs", []):
            keys += list(dotenv(folder / (envs + ".example")))
        out[item["name"]] = keys
    return out


def mount_of(spec: Mapping[str, Any], volume: str) -> PurePosixPath:
    [path] = [m["mountPath"] for m in spec["volumeMounts"] if m["name"] == volume]
    return PurePosixPath(path)


def volume(service: str, name: str) -> dict[str, Any]:
    [found] = [v for v in pod_spec(service)["volumes"] if v["name"] == name]
    return dict(found)


def http_port(service: str, env: Mapping[str, str]) -> int | None:
    """The port the process binds with ``env``: a service's operations port, the gateway's
    PB_GATEWAY_PORT (its API and operations endpoints)."""
    if service == GATEWAY:
        return GatewayConfig.from_env(env).port
    return Settings.from_env(service, env).http_port


def test_kustomization_lists_files_that_exist() -> None:
    for name in kustomization()["resources"]:
        assert (K8S / name).is_file(), name
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in resources()}
    for service in DEPLOYED:
        assert {("Deployment", service), ("Service", service)} <= kinds
    assert kustomization()["namespace"] == "punto-banco"


@pytest.mark.parametrize("service", DEPLOYED)
def test_every_variable_set_is_one_the_code_reads(service: str) -> None:
    unknown = set(environment_of(service)) - KNOWN_VARIABLES - HELPER_VARIABLES
    assert not unknown, f"{service}: variables no code reads: {sorted(unknown)}"


@pytest.mark.parametrize("service", DEPLOYED)
def test_the_settings_read_from_the_manifest_bind_every_interface_on_the_container_port(
    service: str,
) -> None:
    settings = Settings.from_env(service, environment_of(service))
    [port] = container(service)["ports"]
    assert settings.http_host == "0.0.0.0"
    assert http_port(service, environment_of(service)) == port["containerPort"] == PORTS[service]
    assert settings.persistence == "postgres"
    assert settings.log_format == "json"
    # The kubelet's probes and a pod scrape use the pod's IP; the cluster uses the Service.
    for host in (POD_IP, "localhost", service, f"{service}.punto-banco.svc.cluster.local"):
        assert host in settings.allowed_hosts, host


@pytest.mark.parametrize("service", DEPLOYED)
def test_probes_ask_the_endpoints_ops_app_serves(service: str) -> None:
    app = ops_app(object(), bytes, str, service=service, allowed_hosts=["localhost"])  # type: ignore[arg-type]
    paths = {getattr(route, "path", None) for route in app.routes}
    if service == GATEWAY:  # the paths its HTTP server routes to ops_app (the rest: the API)
        paths &= set(OPS_PATHS)
    main = container(service)
    [port] = main["ports"]
    probes = {
        kind: main[kind]["httpGet"] for kind in ("startupProbe", "readinessProbe", "livenessProbe")
    }
    assert probes["readinessProbe"]["path"] == "/ready"
    assert probes["livenessProbe"]["path"] == "/health"
    for probe in probes.values():
        assert probe["path"] in paths
        assert probe["port"] in (port["name"], port["containerPort"])
    # /ready gives its checks 3 s: the probe waits longer than that.
    assert main["readinessProbe"]["timeoutSeconds"] > 3


@pytest.mark.parametrize("service", DEPLOYED)
def test_prometheus_annotations_point_at_the_metrics_port(service: str) -> None:
    template = find("Deployment", service)["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    [port] = container(service)["ports"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port["containerPort"])
    assert annotations["prometheus.io/path"] == "/metrics"


@pytest.mark.parametrize("service", DEPLOYED)
def test_the_service_selects_the_pods_and_exposes_the_metrics_port(service: str) -> None:
    deployment = find("Deployment", service)
    spec = find("Service", service)["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    [port] = container(service)["ports"]
    [exposed] = spec["ports"]
    # The gateway's port is its API (for the platforms' Ingress) and its operations endpoints.
    assert exposed["name"] == ("http" if service == GATEWAY else "ops")
    assert exposed["targetPort"] == port["name"]
    assert exposed["port"] == port["containerPort"]
    assert spec.get("type", "ClusterIP") == "ClusterIP"  # reached from outside by an Ingress only


def copied_secret(service: str, init_name: str, secret_volume: str) -> PurePosixPath:
    """Where init container ``init_name`` copies, mode 0600, the key of ``secret_volume``
    (a Secret mounted for the pod's group only) into the memory volume the service reads."""
    spec = pod_spec(service)
    [init] = [each for each in spec["initContainers"] if each["name"] == init_name]
    command = init["command"] if len(init["command"]) > 2 else shlex.split(init["command"][-1])
    assert command[:3] == ["install", "-m", "0600"]
    source, target = PurePosixPath(command[3]), PurePosixPath(command[4])
    secret = volume(service, secret_volume)["secret"]
    assert secret["defaultMode"] & 0o007 == 0  # never readable by others
    assert source.parent == mount_of(init, secret_volume)
    assert source.name in generated("secretGenerator")[secret["secretName"]]
    assert (
        target.parent
        == mount_of(init, "signing-key")
        == mount_of(container(service), "signing-key")
    )
    assert "emptyDir" in volume(service, "signing-key")
    return target


def test_the_shoes_secret_key_reaches_the_shoe_alone_and_private() -> None:
    settings = Settings.from_env("shoe", environment_of("shoe"))
    target = copied_secret("shoe", "shoe-secret-key", "shoe-secret")
    assert PurePosixPath(str(settings.shoe_secret_key_path)) == target
    assert settings.secret_key_env()["PB_SHOE_SECRET_KEY_FILE"] == str(target)
    for service in ("dealing", "settlement"):
        volumes = {v["name"] for v in pod_spec(service)["volumes"]}
        assert "shoe-secret" not in volumes and "PB_SHOE_SECRET_KEY_FILE" not in environment_of(
            service
        )
    compose = compose_services()
    shoe_env = {key: str(value) for key, value in compose["shoe"]["environment"].items()}
    made = {key: str(value) for key, value in compose["keys"]["environment"].items()}
    own = next(v for v in compose["shoe"]["volumes"] if v["target"] == "/run/keys/own")
    # keys init writes it into the shoe's own folder of the keys volume, mounted read-only.
    assert PurePosixPath(made["PB_SHOE_SECRET_KEY_FILE"]).parent.name == own["volume"]["subpath"]
    assert (
        PurePosixPath(shoe_env["PB_SHOE_SECRET_KEY_FILE"])
        == PurePosixPath(own["target"]) / PurePosixPath(made["PB_SHOE_SECRET_KEY_FILE"]).name
    )
    for service in ("dealing", "settlement"):
        assert "PB_SHOE_SECRET_KEY_FILE" not in compose[service]["environment"]


@pytest.mark.parametrize("service", [*SERVICES, BRIDGE])
def test_the_signing_key_reaches_the_service_private_and_the_keyring_public(
    service: str,
) -> None:
    settings = Settings.from_env(service, environment_of(service))
    main = container(service)
    # The init container copies the Secret's key, mode 0600, to the folder PB_SIGNING_KEY names.
    target = copied_secret(service, "signing-key", "signing-secret")
    assert PurePosixPath(str(settings.signing_key_path)) == target
    # The keyring: a ConfigMap folder, updated in place on rotation.
    keyring = PurePosixPath(str(settings.keyring_path))
    config_map = volume(service, "keyring")["configMap"]["name"]
    assert keyring.parent == mount_of(main, "keyring")
    assert keyring.name in generated("configMapGenerator")[config_map]
    [item] = [i for i in kustomization()["configMapGenerator"] if i["name"] == config_map]
    assert item["options"]["disableNameSuffixHash"] is True


def test_the_supervisors_keyring_reaches_dealing_alone_and_updates_in_place() -> None:
    settings = Settings.from_env("dealing", environment_of("dealing"))
    keyring = PurePosixPath(str(settings.supervisor_keyring_path))
    assert keyring.parent == mount_of(container("dealing"), "supervisors")
    config_map = volume("dealing", "supervisors")["configMap"]["name"]
    assert keyring.name in generated("configMapGenerator")[config_map]
    [item] = [i for i in kustomization()["configMapGenerator"] if i["name"] == config_map]
    assert item["options"]["disableNameSuffixHash"] is True
    for service in ("shoe", "settlement"):
        assert "PB_SUPERVISOR_KEYRING" not in environment_of(service)
    compose = compose_services()
    assert "PB_SUPERVISOR_KEYRING" in compose["dealing"]["environment"]


@pytest.mark.parametrize("service", DEPLOYED)
def test_each_service_logs_in_to_kafka_as_its_own_principal_over_tls(service: str) -> None:
    settings = Settings.from_env(service, environment_of(service))
    auth = settings.kafka_auth
    assert (auth.protocol, auth.mechanism, auth.username) == ("SASL_SSL", "SCRAM-SHA-512", service)
    # The brokers' CA: a ConfigMap mounted where KAFKA_SSL_CAFILE points.
    cafile = PurePosixPath(auth.cafile)
    assert cafile.parent == mount_of(container(service), "kafka-ca")
    config_map = volume(service, "kafka-ca")["configMap"]["name"]
    assert cafile.name in generated("configMapGenerator")[config_map]
    # Its own credentials only: no other service's Secret reaches its pod.
    secrets = {s["secretRef"]["name"] for s in container(service)["envFrom"] if "secretRef" in s}
    assert secrets == {f"punto-banco-postgres-{service}", f"punto-banco-kafka-{service}"}
    compose = {k: str(v) for k, v in compose_services()[service]["environment"].items()}
    assert compose["KAFKA_SASL_USERNAME"] == service
    assert all(
        compose["KAFKA_SASL_USERNAME"] != str(other["environment"].get("KAFKA_SASL_USERNAME"))
        for name, other in compose_services().items()
        if name in DEPLOYED and name != service
    )


@pytest.mark.parametrize("service", DEPLOYED)
def test_every_container_has_requests_and_a_memory_limit(service: str) -> None:
    spec = pod_spec(service)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert find("Deployment", service)["spec"]["strategy"]["type"] == "Recreate"  # one writer
    for each in [*spec["initContainers"], *spec["containers"]]:
        resources = each["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]), each["name"]
        assert "memory" in resources["limits"], each["name"]
        assert each["securityContext"]["allowPrivilegeEscalation"] is False
        assert each["securityContext"]["readOnlyRootFilesystem"] is True
        assert each["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_in_cluster_prometheus_scrapes_the_annotated_pods_of_the_namespace() -> None:
    [config] = load_all(DEPLOY / "prometheus" / "kubernetes.yml")
    [job] = config["scrape_configs"]
    [discovery] = job["kubernetes_sd_configs"]
    assert discovery["role"] == "pod"
    assert discovery["namespaces"]["names"] == [kustomization()["namespace"]]
    sources = {tuple(rule["source_labels"]) for rule in job["relabel_configs"]}
    assert ("__meta_kubernetes_pod_annotation_prometheus_io_scrape",) in sources
    assert ("__meta_kubernetes_pod_annotation_prometheus_io_path",) in sources
    assert any("__meta_kubernetes_pod_annotation_prometheus_io_port" in s for s in sources)
    [monitor] = load_all(K8S / "servicemonitor.yaml")
    assert monitor["spec"]["selector"]["matchExpressions"][0]["values"] == list(DEPLOYED)
    scraped = {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]}
    for service in DEPLOYED:
        [exposed] = find("Service", service)["spec"]["ports"]
        assert exposed["name"] in scraped, service


def compose_services() -> dict[str, Any]:
    """compose.yaml's services, ``${NAME:-default}`` read as compose does without a .env, a
    required ``${NAME:?message}`` as if .env gave it ``<NAME>``."""
    [compose] = load_all(DEPLOY / "compose.yaml")
    services: dict[str, Any] = _interpolated(compose["services"])
    return services


def _interpolated(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _interpolated(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolated(item) for item in value]
    if isinstance(value, str):
        value = re.sub(r"\$\{(\w+):\?[^}]*\}", r"<\1>", value)
        return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)
    return value


@pytest.mark.parametrize("service", DEPLOYED)
def test_compose_publishes_each_metrics_port_on_loopback(service: str) -> None:
    entry = compose_services()[service]
    env = {key: str(value) for key, value in entry["environment"].items()}
    assert set(env) - KNOWN_VARIABLES <= {"PB_SERVICE"}
    assert env["PB_SERVICE"] == service
    settings = Settings.from_env(service, env)
    port = http_port(service, env)
    assert port == PORTS[service]
    assert settings.http_host == "0.0.0.0"
    assert f"127.0.0.1:{port}:{port}" in entry["ports"]
    assert {service, "localhost", "127.0.0.1"} <= set(settings.allowed_hosts)
    assert f"http://127.0.0.1:{port}/ready" in " ".join(entry["healthcheck"]["test"])


def test_the_image_exposes_each_services_port() -> None:
    [expose] = re.findall(r"^EXPOSE (.*)$", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert {int(port) for port in expose.split()} >= set(PORTS.values())


def targets(path: Path) -> dict[str, str]:
    [config] = load_all(path)
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    return {
        group["labels"]["service"]: target
        for group in job["static_configs"]
        for target in group["targets"]
    }


def test_the_prometheus_configs_scrape_the_ports_compose_publishes() -> None:
    """Not the studio bridge's: a deployment without a studio would show it down (the pods'
    annotations and the ServiceMonitor reach it in a cluster)."""
    ports = {service: port for service, port in PORTS.items() if service != BRIDGE}
    assert targets(DEPLOY / "prometheus" / "prometheus.yml") == {
        service: f"127.0.0.1:{port}" for service, port in ports.items()
    }
    assert targets(DEPLOY / "prometheus" / "compose.yml") == {
        service: f"{service}:{port}" for service, port in ports.items()
    }
    prometheus = compose_services()["prometheus"]
    assert "./prometheus/compose.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]


def test_the_docs_say_compose_and_kubernetes_are_not_exercised_here() -> None:
    for path in (K8S / "README.md", DEPLOY / "compose.yaml"):
        assert "not exercised" in path.read_text().lower(), path


# ---- the operator gateway (gateway.yaml) ---------------------------------------------------


def gateway_env() -> dict[str, str]:
    return environment_of(GATEWAY)


def copied_folder(init_name: str, secret_volume: str, target_volume: str) -> tuple[str, str]:
    """What the gateway's init container ``init_name`` copies: every file of the Secret of
    ``secret_volume`` matching a pattern (mounted for the pod's group only), mode 0600, into
    the memory volume ``target_volume`` the gateway reads; (the Secret's name, the pattern)."""
    spec = pod_spec(GATEWAY)
    [init] = [each for each in spec["initContainers"] if each["name"] == init_name]
    assert init["command"][:2] == ["sh", "-c"]
    command = shlex.split(init["command"][2])
    assert command[:3] == ["install", "-m", "0600"] and len(command) == 5
    source, target = PurePosixPath(command[3]), PurePosixPath(command[4])
    secret = volume(GATEWAY, secret_volume)["secret"]
    assert secret["defaultMode"] & 0o007 == 0  # never readable by others
    assert source.parent == mount_of(init, secret_volume)
    assert target == mount_of(init, target_volume) == mount_of(container(GATEWAY), target_volume)
    assert volume(GATEWAY, target_volume)["emptyDir"]["medium"] == "Memory"
    assert all(
        m["readOnly"]
        for m in container(GATEWAY)["volumeMounts"]
        if m["name"] != "data" and m["name"] != "tmp"
    )
    return secret["secretName"], source.name


def test_each_operators_signing_key_reaches_the_gateway_private() -> None:
    """A key per operator's service (``gateway`` the house's, ``gateway-<op>``), where
    PB_SIGNING_KEY's ``{service}`` names it, copied 0600 from the gateway's Secret alone."""
    base = Settings.from_env(GATEWAY, gateway_env())
    secret, pattern = copied_folder("signing-key", "signing-secret", "signing-key")
    files = generated("secretGenerator")[secret]
    for operator in base.operators:
        key = base.for_service(service_name(operator)).signing_key_path
        assert PurePosixPath(str(key)).parent == mount_of(container(GATEWAY), "signing-key")
        assert PurePosixPath(key.name).match(pattern) and key.name in files, operator
    assert PurePosixPath(str(base.keyring_path)).parent == mount_of(container(GATEWAY), "keyring")
    for service in SERVICES:  # no table service holds a gateway's key, nor the other way
        assert secret not in json.dumps(find("Deployment", service))
        assert f"punto-banco-signing-{service}" not in json.dumps(find("Deployment", GATEWAY))


def test_each_operators_file_reaches_the_gateway_private() -> None:
    """The operator files (`operators add`: API and wallet secrets, wallet URL) are copied 0600
    from their Secret into the folder PB_OPERATORS_DIR names; every operator of PB_OPERATORS
    has one, and the gateway serves every file there (PB_GATEWAY_OPERATORS unset)."""
    config = GatewayConfig.from_env(gateway_env())
    secret, pattern = copied_folder("operators", "operators-secret", "operators")
    assert PurePosixPath(str(config.operators_dir)) == mount_of(container(GATEWAY), "operators")
    assert config.operators == ()
    files = generated("secretGenerator")[secret]
    operators = Settings.from_env(GATEWAY, gateway_env()).operators
    assert sorted(files) == sorted(f"{operator}.json" for operator in operators)
    assert all(PurePosixPath(name).match(pattern) for name in files)
    for service in SERVICES:
        assert secret not in json.dumps(find("Deployment", service))


def test_the_gateways_principal_role_and_groups_are_the_ones_the_matrix_and_db_setup_give() -> None:
    """The house's gateway logs in as ``gateway`` (kafka_acls.py's gateway role), each
    operator's service reads under the consumer group the matrix grants its principal, and its
    PostgreSQL role is the one `db setup` (run with no --services by the db-setup Job) makes for
    every operator's store."""
    base = Settings.from_env(GATEWAY, gateway_env())
    principals = project_principals(base.operators)
    assert base.kafka_auth.username == service_name(HOUSE) == GATEWAY
    assert role_of(base.kafka_auth.username, base.operators) == "gateway"
    assert not base.postgres_create_tables
    assert GATEWAY in PROVISIONED
    for operator in base.operators:
        service = service_name(operator)
        assert principals[service] == "gateway"
        settings = gateway_settings(base, OperatorKeys(operator, ("a" * 32,), "w" * 32))
        assert settings.consumer_group == consumer_group(service, base.topic_prefix)
        [store] = store_roles([service], base.postgres_schema_prefix)
        assert (store.login, store.schema) == (base.postgres.user, settings.postgres_schema)


def test_compose_gives_the_gateway_its_key_and_operators_folders_alone() -> None:
    compose = compose_services()
    env = {key: str(value) for key, value in compose[GATEWAY]["environment"].items()}
    base = Settings.from_env(GATEWAY, env)
    mounts = {v["target"]: v for v in compose[GATEWAY]["volumes"]}
    key = PurePosixPath(str(base.for_service(service_name(HOUSE)).signing_key_path))
    assert mounts[str(key.parent)]["volume"]["subpath"] == service_name(HOUSE)
    # `operators add --data-dir /` in the keys one-shot writes <keys volume>/operators/.
    assert mounts[str(GatewayConfig.from_env(env).operators_dir)]["volume"]["subpath"] == (
        "operators"
    )
    assert all(mount["read_only"] for mount in mounts.values())
    for service in SERVICES:
        subpaths = {v["volume"]["subpath"] for v in compose[service]["volumes"]}
        assert not subpaths & {GATEWAY, "operators"}
