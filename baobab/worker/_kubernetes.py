"""``BAOBAB_EXECUTOR=kubernetes``: the advisor sizes the Helm release's worker Deployments
and runs a Deployment and a Service per inference job, and a HorizontalPodAutoscaler when the
chart lets a predictor grow.

Trials still travel through Celery; this manager only changes how many worker pods there
are: the GPU Deployment gets enough pods for the GPUs that active train jobs ask for
(``GPU_COUNT``), the CPU one enough for the CPU jobs' slots, and both go back to zero when
nothing runs. Predictor Deployments are built from the chart's own pods (the advisor's env:
database, broker, secret; the worker image) and carry labels naming their inference job,
so whatever an advisor left behind is found and removed by the next one.

Autoscaling is per inference job: each predictor pod serves its whole job, so more pods of
one job's Deployment behind its Service take more of that job's traffic. (The celery
executor's predictor hosts hold whole jobs by leases instead; adding hosts would not spread
a busy job, and removing one restarts its jobs elsewhere.) The autoscaler follows the pods'
CPU against their request, which needs only the cluster's metrics server.

Credentials: in a pod, the service account the chart gives the advisor; elsewhere the
kubeconfig (``KUBECONFIG`` or ``~/.kube/config``).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

from kubernetes import client, config
from sqlalchemy.engine import Engine

from baobab._settings import Settings
from baobab.worker._pool import Unit, plan, run_reconciler

__all__ = ["KubernetesPool", "KubernetesPoolConfig", "kubernetes_api"]

logger = logging.getLogger(__name__)

JOB_LABEL = "baobab.io/inference-job"
MANAGED_LABEL = "baobab.io/managed-by"
PREDICTOR_PORT = 8200


def kubernetes_api() -> client.ApiClient:
    """An API client with the pod's service account when in a cluster, else the kubeconfig."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


@dataclass(frozen=True)
class KubernetesPoolConfig:
    """Where the Helm release lives and how big its worker pods are.

    ``release`` is the chart's full name (``<release>-baobab``): the worker Deployments are
    ``<release>-worker-cpu`` and ``<release>-worker-gpu``, the advisor ``<release>-advisor``.
    The advisor's come from its settings (``BAOBAB_K8S_NAMESPACE``, ``BAOBAB_K8S_RELEASE``, ...),
    which the chart sets.
    """

    namespace: str
    release: str
    gpus_per_pod: int = 1
    slots_per_pod: int = 2
    max_gpu_pods: int = 64
    max_cpu_pods: int = 64
    predictor_min_pods: int = 1
    predictor_max_pods: int = 1
    predictor_target_cpu: int = 70

    @classmethod
    def from_settings(cls, settings: Settings) -> KubernetesPoolConfig:
        """From the ``BAOBAB_K8S_*`` settings the chart gives the advisor (checked there, with the rest)."""
        return cls(
            namespace=settings.k8s_namespace,
            release=settings.k8s_release,
            gpus_per_pod=settings.k8s_gpus_per_pod,
            slots_per_pod=settings.k8s_slots_per_pod,
            max_gpu_pods=settings.k8s_max_gpu_pods,
            max_cpu_pods=settings.k8s_max_cpu_pods,
            predictor_min_pods=settings.k8s_predictor_min_pods,
            predictor_max_pods=settings.k8s_predictor_max_pods,
            predictor_target_cpu=settings.k8s_predictor_target_cpu,
        )

    @property
    def autoscaled(self) -> bool:
        """Whether a predictor's pods may grow past their minimum (then each gets an autoscaler)."""
        return self.predictor_max_pods > self.predictor_min_pods


class KubernetesPool:
    """Reconciles the worker replicas and the predictors with the active jobs (see the module doc)."""

    def __init__(self, engine: Engine, api: client.ApiClient, pool: KubernetesPoolConfig, *, cpu_slots: int) -> None:
        self.engine = engine
        self.pool = pool
        self.cpu_slots = cpu_slots
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.autoscaling = client.AutoscalingV2Api(api)

    # -- what to run --------------------------------------------------------------

    def replicas(self, units: dict[str, Unit]) -> dict[str, int]:
        """Worker pods per Deployment: enough for every GPU and CPU slot asked for, within the caps."""
        gpus = sum(u.gpus for u in units.values() if u.kind == "worker")
        slots = sum(u.slots for u in units.values() if u.kind == "worker" and u.gpus == 0)
        return {
            f"{self.pool.release}-worker-gpu": min(self.pool.max_gpu_pods, math.ceil(gpus / self.pool.gpus_per_pod)),
            f"{self.pool.release}-worker-cpu": min(self.pool.max_cpu_pods, math.ceil(slots / self.pool.slots_per_pod)),
        }

    def reconcile(self) -> dict[str, Unit]:
        """One round: scale the workers, create missing predictors, delete predictors of ended jobs."""
        units = plan(self.engine, cpu_slots=self.cpu_slots)
        self._scale_workers(units)
        self._sync_predictors({u.job_id for u in units.values() if u.kind == "predictor"})
        return units

    def run(self, stop: threading.Event, *, interval_s: float = 5.0) -> None:
        """Reconciles until ``stop`` is set (the advisor runs this in a thread)."""
        run_reconciler(self.reconcile, stop, interval_s=interval_s, what="kubernetes pool")

    # -- workers ------------------------------------------------------------------

    def _scale_workers(self, units: dict[str, Unit]) -> None:
        ns = self.pool.namespace
        for name, wanted in self.replicas(units).items():
            try:
                current = self.apps.read_namespaced_deployment(name, ns).spec.replicas or 0
            except client.ApiException as e:
                if e.status != 404:
                    raise
                if wanted:  # e.g. GPU jobs on a release installed without GPU workers
                    logger.warning("kubernetes pool: %s should have %d pods but does not exist", name, wanted)
                continue
            if current != wanted:
                logger.info("kubernetes pool: scaling %s from %d to %d pods", name, current, wanted)
                self.apps.patch_namespaced_deployment(name, ns, {"spec": {"replicas": wanted}})

    # -- predictors ---------------------------------------------------------------

    def predictor_name(self, job_id: int) -> str:
        return f"{self.pool.release}-predictor-{job_id}"

    def _managed(self, items: list[Any]) -> dict[int, str]:
        """Job id -> name of the objects this release's manager made (labels checked here too)."""
        found = {}
        for item in items:
            labels = item.metadata.labels or {}
            if labels.get(MANAGED_LABEL) == self.pool.release and labels.get(JOB_LABEL, "").isdigit():
                found[int(labels[JOB_LABEL])] = item.metadata.name
        return found

    def running_predictors(self) -> dict[int, str]:
        selector = f"{MANAGED_LABEL}={self.pool.release}"
        return self._managed(self.apps.list_namespaced_deployment(self.pool.namespace, label_selector=selector).items)

    def _sync_predictors(self, wanted: set[int]) -> None:
        ns = self.pool.namespace
        selector = f"{MANAGED_LABEL}={self.pool.release}"
        deployments = self.running_predictors()
        services = self._managed(self.core.list_namespaced_service(ns, label_selector=selector).items)
        scalers = self._managed(
            self.autoscaling.list_namespaced_horizontal_pod_autoscaler(ns, label_selector=selector).items
        )
        for job_id in sorted(wanted - deployments.keys()):
            deployment, service = self.predictor_objects(job_id)
            logger.info("kubernetes pool: starting the predictor of inference job %d", job_id)
            _tolerate(409, self.apps.create_namespaced_deployment, ns, deployment)
            if job_id not in services:
                _tolerate(409, self.core.create_namespaced_service, ns, service)
        if self.pool.autoscaled:
            for job_id in sorted(wanted - scalers.keys()):
                _tolerate(
                    409, self.autoscaling.create_namespaced_horizontal_pod_autoscaler, ns, self.autoscaler(job_id)
                )
        for job_id, name in sorted(deployments.items()):
            if job_id not in wanted:
                logger.info("kubernetes pool: removing the predictor of inference job %d", job_id)
                _tolerate(404, self.apps.delete_namespaced_deployment, name, ns)
        for job_id, name in sorted(services.items()):
            if job_id not in wanted:
                _tolerate(404, self.core.delete_namespaced_service, name, ns)
        for job_id, name in sorted(scalers.items()):
            if job_id not in wanted or not self.pool.autoscaled:  # also when the chart turned autoscaling off
                _tolerate(404, self.autoscaling.delete_namespaced_horizontal_pod_autoscaler, name, ns)

    def autoscaler(self, job_id: int) -> dict[str, Any]:
        """The HorizontalPodAutoscaler of one inference job's predictor Deployment (see the module doc)."""
        name = self.predictor_name(job_id)
        return {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": self.pool.namespace, "labels": self._labels(job_id)},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "minReplicas": self.pool.predictor_min_pods,
                "maxReplicas": self.pool.predictor_max_pods,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": self.pool.predictor_target_cpu},
                        },
                    }
                ],
            },
        }

    def _labels(self, job_id: int) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "baobab",
            "app.kubernetes.io/component": "predictor",
            MANAGED_LABEL: self.pool.release,
            JOB_LABEL: str(job_id),
        }

    def predictor_objects(self, job_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The Deployment and Service of one inference job's predictor.

        The pod is the advisor's (its env holds the database, broker and secret settings,
        its security context and volumes) with the worker image, which has torch.
        """
        ns, release = self.pool.namespace, self.pool.release
        advisor = self._raw_deployment(f"{release}-advisor")
        worker = self._raw_deployment(f"{release}-worker-cpu")
        image = worker["spec"]["template"]["spec"]["containers"][0]["image"]
        name = self.predictor_name(job_id)
        labels = self._labels(job_id)
        pod = advisor["spec"]["template"]["spec"]
        pod.pop("serviceAccountName", None)
        pod.pop("serviceAccount", None)
        pod["automountServiceAccountToken"] = False
        container = pod["containers"][0]
        container.update(
            name="predictor",
            image=image,
            # the API reaches the predictor through its Service's name
            args=["predictor", "--host", "0.0.0.0", "--port", str(PREDICTOR_PORT)]
            + ["--advertise", f"{name}.{ns}.svc", "--job", str(job_id)],
            ports=[{"name": "http", "containerPort": PREDICTOR_PORT, "protocol": "TCP"}],
            livenessProbe={"tcpSocket": {"port": "http"}, "periodSeconds": 20},
            readinessProbe={"tcpSocket": {"port": "http"}, "periodSeconds": 10},
        )
        # the pool's settings are the advisor's business, not a predictor's
        container["env"] = [e for e in container.get("env", []) if not e["name"].startswith("BAOBAB_K8S_")]
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                # the autoscaler, when there is one, owns the count from here on
                "replicas": self.pool.predictor_min_pods,
                "selector": {"matchLabels": {MANAGED_LABEL: release, JOB_LABEL: str(job_id)}},
                "template": {"metadata": {"labels": labels, "annotations": _scrape(PREDICTOR_PORT)}, "spec": pod},
            },
        }
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "selector": {MANAGED_LABEL: release, JOB_LABEL: str(job_id)},
                "ports": [{"name": "http", "port": PREDICTOR_PORT, "targetPort": "http", "protocol": "TCP"}],
            },
        }
        return deployment, service

    def _raw_deployment(self, name: str) -> dict[str, Any]:
        """A Deployment as the API server wrote it (camelCase JSON), ready to be copied into a new object."""
        response = self.apps.read_namespaced_deployment(name, self.pool.namespace, _preload_content=False)
        return json.loads(response.data)


def _scrape(port: int) -> dict[str, str]:
    """The annotations that ask Prometheus to scrape a pod's ``GET /metrics``, as the chart's own pods have them."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}


def _tolerate(status: int, call: Any, *args: Any) -> None:
    """``call(*args)``, where ``status`` means another advisor did the same first (both run this manager).

    Names are fixed per job, so two advisors reconciling at once race to the same objects:
    the loser's create finds it there (409), its delete finds it gone (404). Neither is an error.
    """
    try:
        call(*args)
    except client.ApiException as e:
        if e.status != status:
            raise
