"""The Helm chart: strict lint, offline renders under the CI values files, and every
rendered manifest checked against the Kubernetes 1.37 OpenAPI schemas (strict: unknown
fields fail) with ``kubernetes-validate``, which bundles the schemas (nothing downloads).

Rendering uses ``helm-python-sdk``: Helm's Go SDK as a shared library, no helm binary.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "helm" / "baobab"
KUBE_VERSION = "1.37.0"
VALUES = {path.stem.removesuffix("-values"): path for path in sorted((CHART / "ci").glob("*-values.yaml"))}


def _values(name: str) -> dict[str, Any]:
    return yaml.safe_load(VALUES[name].read_text()) or {}


def render(values: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The manifests (parsed) and NOTES.txt of an install named ``rel`` in namespace ``ml``."""
    rendered = helm.Chart.load(CHART).render(values, name="rel", namespace="ml", is_install=True)
    notes = rendered.pop("baobab/templates/NOTES.txt")
    docs = [doc for text in rendered.values() for doc in yaml.safe_load_all(text) if doc]
    return docs, notes


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def containers(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {}
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            for container in doc["spec"]["template"]["spec"]["containers"]:
                found[f"{doc['metadata']['name']}/{container['name']}"] = container
    return found


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def test_ci_values_files_exist():
    assert set(VALUES) == {"cpu", "gpu", "external"}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_lints_strictly(name):
    report = helm.lint(CHART, _values(name), strict=True, namespace="ml", kube_version=f"v{KUBE_VERSION}")
    assert report["errors"] == []
    # severity 2 = warning, 3 = error; only "icon is recommended" (info) may remain
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("name", sorted(VALUES))
def test_renders_valid_kubernetes_objects(name):
    docs, _ = render(_values(name))
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_the_validator_does_catch_a_wrong_manifest():
    docs, _ = render(_values("cpu"))
    api = by_kind(docs, "Deployment")["rel-baobab-api"]
    api["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["prot"] = 8100
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(api, KUBE_VERSION, strict=True)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_every_container_has_probes_and_every_baobab_one_runs_as_non_root(name):
    docs, _ = render(_values(name))
    for key, container in containers(docs).items():
        assert "livenessProbe" in container and "readinessProbe" in container, key
    for doc in docs:
        if doc["kind"] == "Deployment" and "baobab-" in doc["spec"]["template"]["spec"]["containers"][0]["image"]:
            assert doc["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_cpu_install_bundles_postgresql_redis_and_an_artifacts_claim():
    docs, notes = render(_values("cpu"))
    assert set(by_kind(docs, "StatefulSet")) == {"rel-baobab-postgresql"}
    assert set(by_kind(docs, "Deployment")) == {
        "rel-baobab-api",
        "rel-baobab-advisor",
        "rel-baobab-worker-cpu",
        "rel-baobab-predictor",
        "rel-baobab-redis",
    }
    assert set(by_kind(docs, "PersistentVolumeClaim")) == {"rel-baobab-artifacts"}
    assert by_kind(docs, "Ingress") == {} and by_kind(docs, "Role") == {}
    worker = by_kind(docs, "Deployment")["rel-baobab-worker-cpu"]
    assert worker["spec"]["replicas"] == 2
    container = worker["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["worker", "--slots", "4", "--name", "worker@$(POD_NAME)", "--metrics-port", "9101"]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    worker_env = env(container)
    assert worker_env["BAOBAB_API_URL"] == "http://rel-baobab-api:8100"
    assert "BAOBAB_DATABASE_URL" not in worker_env and "BAOBAB_SECRET_KEY" not in worker_env  # workers hold neither
    api_env = env(containers(docs)["rel-baobab-api/api"])
    assert api_env["BAOBAB_DATABASE_URL"] == (
        "postgresql+psycopg2://baobab:$(POSTGRES_PASSWORD)@rel-baobab-postgresql:5432/baobab"
    )
    assert api_env["BAOBAB_MODE"] == "production"
    probe = containers(docs)["rel-baobab-api/api"]["livenessProbe"]["httpGet"]
    assert probe == {"path": "/api/v1/openapi.json", "port": "http"}
    assert "kubectl --namespace ml port-forward svc/rel-baobab-api 8100:8100" in notes
    assert "admin@baobab.local" in notes and "admin-password" in notes


def test_gpu_workers_ask_for_gpus_on_the_selected_nodes():
    docs, notes = render(_values("gpu"))
    gpu = by_kind(docs, "Deployment")["rel-baobab-worker-gpu"]
    pod = gpu["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["args"][:3] == ["worker", "--gpus", "0,1"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # the kubernetes executor owns the worker replicas and predictors, with just the rights for it
    assert gpu["spec"]["replicas"] == 0
    assert "rel-baobab-predictor" not in by_kind(docs, "Deployment")
    assert by_kind(docs, "Deployment")["rel-baobab-advisor"]["spec"]["template"]["spec"]["serviceAccountName"] == (
        "rel-baobab-advisor"
    )
    role = by_kind(docs, "Role")["rel-baobab-advisor"]
    assert {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch", "update"]} in role[
        "rules"
    ]
    ingress = by_kind(docs, "Ingress")["rel-baobab"]
    assert ingress["spec"]["rules"][0]["host"] == "baobab.example.com"
    assert ingress["spec"]["tls"][0]["secretName"] == "baobab-tls"
    assert "https://baobab.example.com/" in notes


def test_external_database_redis_and_object_storage():
    docs, _ = render(_values("external"))
    assert by_kind(docs, "StatefulSet") == {} and by_kind(docs, "PersistentVolumeClaim") == {}
    assert "rel-baobab-redis" not in by_kind(docs, "Deployment")
    api = containers(docs)["rel-baobab-api/api"]
    api_env = env(api)
    assert api_env["BAOBAB_DATABASE_URL"] == {"secretKeyRef": {"name": "baobab-db", "key": "url"}}
    assert api_env["BAOBAB_BROKER_URL"] == {"secretKeyRef": {"name": "rel-baobab-secrets", "key": "broker-url"}}
    assert api_env["BAOBAB_ARTIFACTS_URL"] == "s3://baobab-artifacts/prod"
    assert api_env["BAOBAB_TRIAL_TIMEOUT_S"] == "3600"
    assert all(m["name"] != "artifacts" for m in api["volumeMounts"])
    secret = by_kind(docs, "Secret")["rel-baobab-secrets"]
    assert base64.b64decode(secret["data"]["broker-url"]).decode() == "redis://:pw@redis.internal:6379/0"
    assert "postgres-password" not in secret["data"] and "database-url" not in secret["data"]


def test_external_database_without_a_url_is_refused_naming_the_value():
    with pytest.raises(helm.HelmError, match=r"externalDatabase\.url"):
        render({"postgresql": {"enabled": False}})


def test_secrets_are_generated_never_fixed():
    first = by_kind(render(_values("cpu"))[0], "Secret")["rel-baobab-secrets"]["data"]
    second = by_kind(render(_values("cpu"))[0], "Secret")["rel-baobab-secrets"]["data"]
    assert set(first) == {"secret-key", "admin-password", "postgres-password", "redis-password"}
    for key in first:
        assert first[key] != second[key], key  # random at every fresh install
    assert len(base64.b64decode(first["secret-key"])) == 64
    given = by_kind(render({"admin": {"password": "s3cret-Pass"}})[0], "Secret")["rel-baobab-secrets"]["data"]
    assert base64.b64decode(given["admin-password"]) == b"s3cret-Pass"


def test_pod_annotations_stay_strings_whatever_the_secret_hashes_to():
    # A 16-hex-digit checksum of digits only (or digits and one 'e') reads as a YAML number, which the
    # Kubernetes API refuses; the chart quotes it. The secrets are random, so render several times.
    for _ in range(5):
        for name, deployment in by_kind(render(_values("cpu"))[0], "Deployment").items():
            annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
            assert all(isinstance(value, str) for value in annotations.values()), (name, annotations)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_every_baobab_pod_but_the_predictor_host_is_annotated_for_scraping_on_a_port_it_serves(name):
    docs, _ = render(_values(name))
    scraped = {}
    for deployment_name, deployment in by_kind(docs, "Deployment").items():
        pod = deployment["spec"]["template"]
        annotations = pod["metadata"].get("annotations", {})
        if "prometheus.io/scrape" not in annotations:
            continue
        assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/path"] == "/metrics"
        container = pod["spec"]["containers"][0]
        port = annotations["prometheus.io/port"]
        assert port in {str(p["containerPort"]) for p in container["ports"]}, deployment_name
        scraped[deployment_name.removeprefix("rel-baobab-")] = (port, container["args"])
    workers = {"worker-cpu", "worker-gpu"} if name == "gpu" else {"worker-cpu"}
    # the predictor host's predictors take a port per inference job: no one port to name
    assert set(scraped) == {"api", "advisor", *workers}
    api_port, _ = scraped.pop("api")
    assert api_port == "8100"  # /metrics beside the API itself
    for component, (port, args) in scraped.items():  # a port of their own, which the command is told
        assert args[args.index("--metrics-port") + 1] == port, component
    assert scraped["advisor"][0] != scraped["worker-cpu"][0]


def test_metrics_ports_come_from_the_values():
    docs, _ = render({"advisor": {"metricsPort": 9300}, "workers": {"metricsPort": 9301}})
    deployments = by_kind(docs, "Deployment")
    for name, port in (("rel-baobab-advisor", "9300"), ("rel-baobab-worker-cpu", "9301")):
        pod = deployments[name]["spec"]["template"]
        assert pod["metadata"]["annotations"]["prometheus.io/port"] == port
        assert pod["spec"]["containers"][0]["args"][-2:] == ["--metrics-port", port]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels and In expressions, what the chart uses) selects ``labels``."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def _pod_labels(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    return by_kind(docs, "Deployment")[name]["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("name", sorted(VALUES))
def test_every_baobab_container_runs_non_root_with_no_capability_on_a_read_only_root(name):
    """Templates run in the workers and predictors; the API and advisors are held the same."""
    docs, _ = render(_values(name))
    baobab = {
        doc["metadata"]["name"]: doc["spec"]["template"]["spec"]
        for doc in docs
        if doc["kind"] == "Deployment" and "baobab-" in doc["spec"]["template"]["spec"]["containers"][0]["image"]
    }
    assert {"rel-baobab-api", "rel-baobab-advisor", "rel-baobab-worker-cpu"} <= set(baobab)
    for deployment, pod in baobab.items():
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        if deployment != "rel-baobab-advisor" or name != "gpu":  # the kubernetes executor's advisor uses the API
            assert pod["automountServiceAccountToken"] is False, deployment
        (container,) = pod["containers"]
        assert container["securityContext"] == {
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }, deployment
        # it writes only to emptyDir volumes (/tmp, BAOBAB_HOME, /dev/shm) and to the artifacts
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
        assert mounts["/tmp"] == "tmp" and mounts["/data"] == "home" and env(container)["BAOBAB_HOME"] == "/data"
        for path, volume in mounts.items():
            assert "emptyDir" in volumes[volume] or volume == "artifacts", (deployment, path)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_the_worker_pods_reach_only_the_api_the_broker_and_dns(name):
    docs, _ = render(_values(name))
    (policy,) = by_kind(docs, "NetworkPolicy").values()
    kubernetes_validate.validate(policy, KUBE_VERSION, strict=True)
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    selected = {d for d in by_kind(docs, "Deployment") if _selects(spec["podSelector"], _pod_labels(docs, d))}
    workers = {"rel-baobab-worker-cpu", "rel-baobab-worker-gpu"} if name == "gpu" else {"rel-baobab-worker-cpu"}
    assert selected == workers  # the trial pods, and no other
    assert spec["ingress"] == [{"ports": [{"port": 9101, "protocol": "TCP"}]}]  # metrics only

    def reached(rule: dict[str, Any]) -> set[str]:
        """The chart's Deployments whose pods a rule's peers select."""
        return {
            d
            for d in by_kind(docs, "Deployment")
            for peer in rule.get("to", [])
            if "podSelector" in peer and _selects(peer["podSelector"], _pod_labels(docs, d))
        }

    egress = spec["egress"]
    assert reached(egress[0]) == {"rel-baobab-api"} and egress[0]["ports"] == [{"port": 8100, "protocol": "TCP"}]
    api = containers(docs)["rel-baobab-api/api"]
    assert api["ports"][0]["containerPort"] == 8100  # the port the policy opens is the one the API listens on
    dns = {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    if name == "external":  # no bundled Redis: the values' own rule reaches the broker and the object storage
        assert egress[1:] == [dns, *_values("external")["networkPolicy"]["extraEgress"]]
    else:
        assert reached(egress[1]) == {"rel-baobab-redis"} and egress[1]["ports"] == [{"port": 6379, "protocol": "TCP"}]
        assert egress[2:] == [dns]


def test_an_external_broker_or_artifacts_url_without_extra_egress_is_refused_naming_the_value():
    external = _values("external")
    del external["networkPolicy"]
    with pytest.raises(helm.HelmError, match=r"networkPolicy\.extraEgress must let the workers reach"):
        render(external)
    with pytest.raises(helm.HelmError, match=r"networkPolicy\.extraEgress"):
        render({"artifacts": {"url": "s3://bucket/baobab"}})
    docs, _ = render({**external, "networkPolicy": {"enabled": False}})  # the operator's own policy instead
    assert by_kind(docs, "NetworkPolicy") == {}
