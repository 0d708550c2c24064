"""The kubernetes executor against kmock's Kubernetes EMULATOR (an in-memory API server on
loopback, see conftest.py), not a real cluster: the cluster state is the chart's own
rendered Deployments, created in the emulator, and the executor is checked by the
objects it leaves there as jobs start and end.
"""

from __future__ import annotations

import re

import kubernetes_validate
import pytest
from test_deploy_helm import KUBE_VERSION, by_kind, render

from baobab import Settings, SettingsError
from baobab.store import JobStatus
from baobab.worker._kubernetes import JOB_LABEL, MANAGED_LABEL, KubernetesPool, KubernetesPoolConfig

RELEASE = "rel-baobab"


def install_chart(kube) -> None:
    docs, _ = render({"executor": "kubernetes", "workers": {"gpu": {"enabled": True, "gpusPerPod": 2}}})
    for doc in by_kind(docs, "Deployment").values():
        kube.apps.create_namespaced_deployment("ml", doc)


def pool(jobs, kube, **overrides) -> KubernetesPool:
    config = KubernetesPoolConfig(namespace="ml", release=RELEASE, gpus_per_pod=2, slots_per_pod=2, **overrides)
    return KubernetesPool(jobs.engine, kube.api, config, cpu_slots=2)


def replicas(kube) -> dict[str, int]:
    return {
        kind: kube.apps.read_namespaced_deployment(f"{RELEASE}-worker-{kind}", "ml").spec.replicas
        for kind in ("cpu", "gpu")
    }


def test_workers_follow_the_gpus_and_slots_that_running_jobs_ask_for(jobs, kube):
    install_chart(kube)
    manager = pool(jobs, kube)
    assert replicas(kube) == {"cpu": 0, "gpu": 0}  # the chart leaves the sizing to the executor
    manager.reconcile()
    assert replicas(kube) == {"cpu": 0, "gpu": 0}

    three = jobs.train(gpus=3)
    one = jobs.train(gpus=1, status=JobStatus.PENDING)
    cpu = jobs.train(gpus=0)
    manager.reconcile()
    assert replicas(kube) == {"cpu": 1, "gpu": 2}  # 4 GPUs at 2 a pod; 2 CPU slots at 2 a pod

    jobs.end_train(three, JobStatus.STOPPED)
    manager.reconcile()
    assert replicas(kube) == {"cpu": 1, "gpu": 1}

    jobs.end_train(one)
    jobs.end_train(cpu, JobStatus.ERRORED)
    manager.reconcile()
    assert replicas(kube) == {"cpu": 0, "gpu": 0}  # idle: back to nothing


def test_worker_pods_are_capped(jobs, kube):
    install_chart(kube)
    jobs.train(gpus=40)
    pool(jobs, kube, max_gpu_pods=4).reconcile()
    assert replicas(kube)["gpu"] == 4


def test_each_inference_job_gets_a_predictor_deployment_and_service_removed_when_it_stops(jobs, kube):
    install_chart(kube)
    manager = pool(jobs, kube)
    trained = jobs.train(status=JobStatus.COMPLETED)
    first, second = jobs.serve(trained), jobs.serve(trained)
    manager.reconcile()
    assert manager.running_predictors() == {
        first: f"{RELEASE}-predictor-{first}",
        second: f"{RELEASE}-predictor-{second}",
    }

    deployment = kube.apps.read_namespaced_deployment(f"{RELEASE}-predictor-{first}", "ml")
    assert deployment.metadata.labels[JOB_LABEL] == str(first)
    assert deployment.metadata.labels[MANAGED_LABEL] == RELEASE
    container = deployment.spec.template.spec.containers[0]
    assert container.image == "baobab-worker:0.1.0"  # the worker image: the predictor needs torch
    assert container.args[-5:] == ["8200", "--advertise", f"{RELEASE}-predictor-{first}.ml.svc", "--job", str(first)]
    env = {e.name for e in container.env}
    assert {"BAOBAB_DATABASE_URL", "BAOBAB_SECRET_KEY", "BAOBAB_BROKER_URL"} <= env
    assert not {name for name in env if name.startswith("BAOBAB_K8S_")}  # the pool is the advisor's business
    assert deployment.spec.template.spec.service_account_name is None  # no API rights for predictors
    # its inference workers run templates: confined as the chart's trial pods are, with no token either
    pod = deployment.spec.template.spec
    assert pod.automount_service_account_token is False and pod.security_context.run_as_non_root is True
    confined = container.security_context
    assert (confined.read_only_root_filesystem, confined.allow_privilege_escalation) == (True, False)
    assert confined.capabilities.drop == ["ALL"]
    assert {m.mount_path for m in container.volume_mounts} == {"/tmp", "/data", "/data/artifacts"}
    # scraped on the port it serves /predict on; none of the advisor's pod (whose spec it copies) is left
    assert deployment.spec.template.metadata.annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8200",
        "prometheus.io/path": "/metrics",
    }
    assert [(p.name, p.container_port) for p in container.ports] == [("http", 8200)]
    service = kube.core.read_namespaced_service(f"{RELEASE}-predictor-{first}", "ml")
    assert service.spec.selector == {MANAGED_LABEL: RELEASE, JOB_LABEL: str(first)}
    assert service.spec.ports[0].port == 8200  # the port the predictor listens on, in the URL it advertises

    jobs.end_inference(first)
    manager.reconcile()
    assert manager.running_predictors() == {second: f"{RELEASE}-predictor-{second}"}
    names = {s.metadata.name for s in kube.core.list_namespaced_service("ml").items}
    assert f"{RELEASE}-predictor-{first}" not in names and f"{RELEASE}-predictor-{second}" in names


def test_an_autoscaled_predictor_grows_by_cpu_within_the_charts_bounds_and_its_autoscaler_goes_with_it(jobs, kube):
    install_chart(kube)
    manager = pool(jobs, kube, predictor_min_pods=2, predictor_max_pods=5, predictor_target_cpu=60)
    trained = jobs.train(status=JobStatus.COMPLETED)
    first, second = jobs.serve(trained), jobs.serve(trained)
    manager.reconcile()
    name = f"{RELEASE}-predictor-{first}"
    assert kube.apps.read_namespaced_deployment(name, "ml").spec.replicas == 2  # the autoscaler's floor
    scaler = kube.autoscaling.read_namespaced_horizontal_pod_autoscaler(name, "ml")
    assert (scaler.spec.min_replicas, scaler.spec.max_replicas) == (2, 5)
    assert scaler.spec.scale_target_ref.to_dict() == {"api_version": "apps/v1", "kind": "Deployment", "name": name}
    assert scaler.spec.metrics[0].resource.target.average_utilization == 60
    assert scaler.metadata.labels[JOB_LABEL] == str(first)
    kubernetes_validate.validate(manager.autoscaler(first), KUBE_VERSION, strict=True)

    jobs.end_inference(first)
    manager.reconcile()
    names = {s.metadata.name for s in kube.autoscaling.list_namespaced_horizontal_pod_autoscaler("ml").items}
    assert names == {f"{RELEASE}-predictor-{second}"}


def test_a_predictor_of_fixed_size_gets_no_autoscaler(jobs, kube):
    install_chart(kube)
    served = jobs.serve(jobs.train(status=JobStatus.COMPLETED))
    pool(jobs, kube, predictor_min_pods=1, predictor_max_pods=4).reconcile()
    assert len(kube.autoscaling.list_namespaced_horizontal_pod_autoscaler("ml").items) == 1
    manager = pool(jobs, kube, predictor_min_pods=3, predictor_max_pods=3)  # the chart turned autoscaling off
    kube.apps.delete_namespaced_deployment(f"{RELEASE}-predictor-{served}", "ml")  # made again at the new size
    manager.reconcile()
    assert kube.apps.read_namespaced_deployment(f"{RELEASE}-predictor-{served}", "ml").spec.replicas == 3
    assert kube.autoscaling.list_namespaced_horizontal_pod_autoscaler("ml").items == []


def test_a_new_manager_cleans_up_what_a_crashed_one_left(jobs, kube):
    install_chart(kube)
    trained = jobs.train(status=JobStatus.COMPLETED)
    served = jobs.serve(trained)
    pool(jobs, kube).reconcile()
    jobs.end_inference(served)  # ...while no manager runs
    pool(jobs, kube).reconcile()  # a fresh one knows only the labels
    assert pool(jobs, kube).running_predictors() == {}
    # the chart's own Deployments are not the manager's to remove
    names = {d.metadata.name for d in kube.apps.list_namespaced_deployment("ml").items}
    assert {f"{RELEASE}-api", f"{RELEASE}-advisor", f"{RELEASE}-worker-cpu", f"{RELEASE}-worker-gpu"} <= names


def test_a_release_without_gpu_workers_is_left_alone(jobs, kube):
    docs, _ = render({"executor": "kubernetes"})
    for doc in by_kind(docs, "Deployment").values():
        kube.apps.create_namespaced_deployment("ml", doc)
    jobs.train(gpus=2)
    pool(jobs, kube).reconcile()  # logs a warning, does not fail
    assert kube.apps.read_namespaced_deployment(f"{RELEASE}-worker-cpu", "ml").spec.replicas == 0


def test_the_pool_config_comes_from_what_the_chart_gives_the_advisor():
    docs, _ = render({"executor": "kubernetes", "workers": {"gpu": {"enabled": True, "gpusPerPod": 4, "replicas": 3}}})
    advisor = by_kind(docs, "Deployment")[f"{RELEASE}-advisor"]["spec"]["template"]["spec"]["containers"][0]
    environ = _pool_environ(advisor)
    environ["BAOBAB_K8S_NAMESPACE"] = "ml"  # the chart has the downward API fill it in
    assert KubernetesPoolConfig.from_settings(Settings.from_env(environ)) == KubernetesPoolConfig(
        namespace="ml", release=RELEASE, gpus_per_pod=4, slots_per_pod=2, max_gpu_pods=3, max_cpu_pods=1
    )
    with pytest.raises(SettingsError, match="BAOBAB_K8S_GPUS_PER_POD='two'"):
        Settings.from_env({"BAOBAB_K8S_GPUS_PER_POD": "two"})


def test_the_charts_predictor_autoscaling_reaches_the_advisor_and_bad_bounds_are_refused():
    values = {"executor": "kubernetes", "predictor": {"autoscaling": {"minPods": 2, "maxPods": 8}}}
    docs, _ = render(values)
    advisor = by_kind(docs, "Deployment")[f"{RELEASE}-advisor"]["spec"]["template"]["spec"]["containers"][0]
    config = KubernetesPoolConfig.from_settings(Settings.from_env(_pool_environ(advisor)))
    assert (config.predictor_min_pods, config.predictor_max_pods, config.predictor_target_cpu) == (2, 8, 70)
    assert config.autoscaled
    rules = by_kind(docs, "Role")[f"{RELEASE}-advisor"]["rules"]
    assert {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"]} in [
        {k: rule[k] for k in ("apiGroups", "resources")} for rule in rules
    ]
    bad = [
        (
            {"MIN_PODS": "3", "MAX_PODS": "2"},
            "BAOBAB_K8S_PREDICTOR_MIN_PODS=3 is more than BAOBAB_K8S_PREDICTOR_MAX_PODS=2",
        ),
        ({"MIN_PODS": "0"}, "BAOBAB_K8S_PREDICTOR_MIN_PODS='0': expected an integer >= 1"),
        ({"TARGET_CPU": "0"}, "BAOBAB_K8S_PREDICTOR_TARGET_CPU='0': expected an integer >= 1"),
        ({"TARGET_CPU": "101"}, "BAOBAB_K8S_PREDICTOR_TARGET_CPU=101: expected a percentage, 1 to 100"),
    ]
    for given, message in bad:
        with pytest.raises(SettingsError, match=re.escape(message)):
            Settings.from_env({f"BAOBAB_K8S_PREDICTOR_{name}": value for name, value in given.items()})


def _pool_environ(advisor: dict) -> dict[str, str]:
    """The pool's settings the chart gives the advisor container (those with a literal value)."""
    return {e["name"]: e["value"] for e in advisor["env"] if e["name"].startswith("BAOBAB_K8S_") and "value" in e}


def test_two_advisors_racing_to_the_same_predictor_both_carry_on(jobs, kube, monkeypatch):
    """Every advisor runs the manager; one that lists just before the other creates (or deletes) loses the race."""
    install_chart(kube)
    served = jobs.serve(jobs.train(status=JobStatus.COMPLETED))
    first, late = pool(jobs, kube), pool(jobs, kube)
    first.reconcile()
    monkeypatch.setattr(late, "running_predictors", lambda: {})  # it listed before ``first`` created
    late.reconcile()  # its create answers 409: not an error
    assert first.running_predictors() == {served: f"{RELEASE}-predictor-{served}"}

    jobs.end_inference(served)
    monkeypatch.setattr(late, "running_predictors", lambda: {served: f"{RELEASE}-predictor-{served}"})
    first.reconcile()
    late.reconcile()  # it listed before ``first`` deleted: its delete answers 404
    assert first.running_predictors() == {}
