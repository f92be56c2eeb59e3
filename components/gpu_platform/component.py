"""GpuPlatform: the cluster-wide half of the GPU tier (operator, sharing, steering, metrics, quotas, alerts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes as kubernetes
import pulumi_kubernetes.provider

from components.gpu_platform.alert_rules import build_gpu_alert_rules, prometheus_rule_labels
from components.gpu_platform.cel_policies import (
    build_cpu_guard_validating_policy,
    build_gpu_quota_generating_policies,
    build_gpu_steering_mutating_policy,
    build_multi_gpu_validating_policy,
)
from components.gpu_platform.cpu_guard_policy import build_cpu_guard_policy
from components.gpu_platform.dashboard import build_dashboard_configmap
from components.gpu_platform.dcgm_metrics import build_dcgm_metrics_configmap, deployed_exporter_version
from components.gpu_platform.driver_template import driver_configmaps, stack_release_values
from components.gpu_platform.health_check import HealthCheckBundle, build_health_alert_rules, build_health_check
from components.gpu_platform.multi_gpu import WholeCards
from components.gpu_platform.namespaces import build_operator_namespace, build_smoke_namespace
from components.gpu_platform.operator_crds import crd_resource_suffix
from components.gpu_platform.operator_wait import OPERATOR_WAIT_SECONDS, operator_wait_command
from components.gpu_platform.quota_policy import build_gpu_quota_generate_policy
from components.gpu_platform.quotas import build_gpu_quotas, build_kyverno_quota_rbac
from components.gpu_platform.release_values import driver_proxy, registered_crds
from components.gpu_platform.steering_policy import build_gpu_steering_policy, build_multi_gpu_policy
from components.gpu_platform.time_slicing import TIME_SLICING_CONFIGMAP, build_time_slicing_configmap
from components.shared.kubectl import kubectl_prefix
from components.shared.kubernetes_objects import register_helm_release, register_object
from components.shared.platform_handles import PlatformHandles
from config.proxy import proxy_environment
from config.stack import StackConfig
from knowledge.gpu_operator_chart import CHART_NAME

TYPE_TOKEN = "gpu-pool:kubernetes:GpuPlatform"


@dataclass(frozen=True)
class GpuPlatformArgs:
    stack: StackConfig
    kubernetes_provider: pulumi_kubernetes.provider.Provider
    # With repair.healthCheck.enabled: the check's code and the pool's facts, and the stack's name for the alert's
    # runbook (`gpu-pool repair <node> --stack <name>`).
    health_check: HealthCheckBundle | None = None
    stack_name: str = ""
    # gpu-pool:proxyAuth (with proxy.login): into the driver's proxy Secret only.
    proxy_auth: pulumi.Output[str] | None = None


class GpuPlatform(pulumi.ComponentResource):
    handles: PlatformHandles

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        self._name = name
        self._k8s = pulumi.ResourceOptions(parent=self, provider=args.kubernetes_provider)
        cfg = args.stack
        namespace, time_slicing = self._operator(cfg, args.proxy_auth)
        steering = self._policies(cfg)
        smoke_namespace: pulumi.Resource | None = None
        if cfg.smoke_test.enabled:
            smoke_namespace = self._object("smoke-test-namespace", build_smoke_namespace(cfg.smoke_test))
        self._monitoring(cfg)
        if cfg.repair.health_check.enabled:
            self._health_check(args, after=[r for r in (namespace, smoke_namespace) if r is not None])
        self._quotas(cfg)

        self.handles = PlatformHandles(
            time_slicing_config=time_slicing,
            operator=self.operator_ready,
            smoke_namespace=smoke_namespace,
            steering_policy=steering,
        )
        operator_cfg = cfg.gpu_operator
        self.register_outputs(
            {
                "operatorNamespace": operator_cfg.namespace,
                "chartVersion": operator_cfg.chart_version,
                "driverVersion": operator_cfg.driver_version,
                "sharingProfiles": {n: p.replicas for n, p in sorted(cfg.sharing_profiles.items())},
                "schedulableGpuSlots": cfg.total_slots,
            }
        )

    def _after(self, *deps: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(self._k8s, pulumi.ResourceOptions(depends_on=list(deps)))

    def _object(
        self, suffix: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> pulumi.Resource:
        """One Kubernetes object of the platform, `<name>-<suffix>`, on the cluster's provider."""
        return register_object(f"{self._name}-{suffix}", manifest, opts or self._k8s)

    def _driver_proxy(
        self, cfg: StackConfig, login: pulumi.Output[str] | None, namespace: pulumi.Resource
    ) -> list[pulumi.Resource]:
        """With proxy.login: the Secret of the driver container's proxy variables, their URLs carrying the login
        (driver.secretEnv names it; the operator adds it as envFrom). The SDK's typed Secret marks its data secret."""
        _env, secret_env = driver_proxy(cfg.proxy, cfg.rke2)
        if secret_env is None or login is None:
            return []
        proxy, rke2 = cfg.proxy, cfg.rke2
        plain: pulumi.Output[dict[str, str]] = login.apply(lambda value: proxy_environment(proxy, rke2, login=value))
        env: pulumi.Output[dict[str, str]] = pulumi.Output.secret(plain)
        metadata: Any = {"name": secret_env, "namespace": cfg.gpu_operator.namespace}
        secret = kubernetes.core.v1.Secret(
            f"{self._name}-driver-proxy",
            metadata=metadata,
            type="Opaque",
            string_data=env,
            opts=pulumi.ResourceOptions.merge(self._k8s, pulumi.ResourceOptions(depends_on=[namespace])),
        )
        return [secret]

    def _operator(
        self, cfg: StackConfig, proxy_auth: pulumi.Output[str] | None = None
    ) -> tuple[pulumi.Resource, pulumi.Resource]:
        """The operator's namespace, what its release reads (the sharing profiles, the DCGM metrics, the CRDs), the
        release and the step that waits for the operator: (the namespace, the time-slicing ConfigMap)."""
        operator_cfg = cfg.gpu_operator
        namespace = self._object("namespace", build_operator_namespace(operator_cfg.namespace))
        # Created before the release: a ClusterPolicy that names a missing ConfigMap takes a card from one
        # schedulable GPU to zero (the article's time-slicing trap).
        time_slicing = self._object(
            "time-slicing-config",
            build_time_slicing_configmap(cfg.sharing_profiles, operator_cfg.namespace),
            self._after(namespace),
        )
        dcgm_metrics = self._object(
            "dcgm-metrics",
            build_dcgm_metrics_configmap(operator_cfg.namespace, deployed_exporter_version(operator_cfg)),
            self._after(namespace),
        )
        # Before the release too: the operator fails the driver's pods on a repoConfig (the apt sources) or certConfig
        # (the lab CA) ConfigMap it cannot read, and mounts both into the driver container. Built by the function
        # whose content digest the release's driver env carries (driver_template.py).
        mounted = [
            self._object(suffix, configmap, self._after(namespace))
            for suffix, configmap in driver_configmaps(
                cfg.apt_mirror, cfg.proxmox.guest_os, cfg.trusted_ca, operator_cfg.namespace
            ).items()
        ]
        # Before the release too: the operator fails the driver's DaemonSet on a secretEnv Secret it cannot read.
        mounted += self._driver_proxy(cfg, proxy_auth, namespace)
        # retain_on_delete: a CRD leaving the plan (a chart source removed, a CRD dropped upstream) must never
        # delete the CRD, which deletes every object of its kind, the ClusterPolicy first.
        crd_opts = pulumi.ResourceOptions.merge(self._k8s, pulumi.ResourceOptions(retain_on_delete=True))
        crds = [self._object(crd_resource_suffix(crd), crd, crd_opts) for crd in registered_crds(operator_cfg)]
        self.release = register_helm_release(
            f"{self._name}-gpu-operator",
            _release(cfg, crds_registered=bool(crds)),
            self._after(namespace, time_slicing, dcgm_metrics, *mounted, *crds),
        )
        wait = operator_wait_command(
            kubectl_prefix(cfg.kubernetes.kubeconfig, cfg.kubernetes.context), operator_cfg.namespace
        )
        self.operator_ready = command.local.Command(
            f"{self._name}-gpu-operator-ready",
            create=wait,  # and on an update too: pulumi-command runs create when no update is given
            interpreter=["/bin/sh", "-c"],
            environment={"TIMEOUT_SECONDS": str(OPERATOR_WAIT_SECONDS)},
            # A chart bump rolls the operator: wait for the new one.
            triggers=[operator_cfg.chart_version],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release]),
        )
        return namespace, time_slicing

    def _policies(self, cfg: StackConfig) -> pulumi.Resource | None:
        """Kyverno's steering of GPU pods (returned: the smoke test waits for it), the refusal of multi-GPU pods no
        whole domain can hold, and the CPU guard: its CEL policy types (policies.kyverno.io/v1), or the
        ClusterPolicies for Kyverno < 1.17."""
        cel = cfg.kyverno.policy_api == "cel"
        namespace = cfg.gpu_operator.namespace
        steering: pulumi.Resource | None = None
        if cfg.kyverno.enabled:
            # Independent of the release: GPU pods can be steered before the operator is up.
            whole = WholeCards.of(cfg)
            build_steering = build_gpu_steering_mutating_policy if cel else build_gpu_steering_policy
            steering = self._object(
                "gpu-steering-policy", build_steering(cfg.kyverno, operator_namespace=namespace, whole=whole)
            )
            build_refusal = build_multi_gpu_validating_policy if cel else build_multi_gpu_policy
            self._object("gpu-multi-gpu-policy", build_refusal(cfg.kyverno, operator_namespace=namespace, whole=whole))
        build_guard = build_cpu_guard_validating_policy if cel else build_cpu_guard_policy
        cpu_guard = build_guard(cfg.kyverno, operator_namespace=namespace)
        if cpu_guard is not None:
            self._object("gpu-cpu-guard-policy", cpu_guard)
        return steering

    def _monitoring(self, cfg: StackConfig) -> None:
        if cfg.monitoring.dashboard_enabled:
            self._object("dashboard", build_dashboard_configmap(cfg.monitoring))
        if cfg.monitoring.alerts_enabled:
            self._object(
                "alert-rules",
                build_gpu_alert_rules(
                    cfg.monitoring,
                    expected_slots_by_node={d.hostname: cfg.slots(d) for d in cfg.failure_domains},
                    slots_per_card_by_node={
                        d.hostname: cfg.sharing_profiles[d.sharing].replicas for d in cfg.failure_domains
                    },
                    # The exporter's namespace: DcgmExporterDown filters its `up` series on it.
                    namespace=cfg.gpu_operator.namespace,
                ),
            )

    def _health_check(self, args: GpuPlatformArgs, after: list[pulumi.Resource]) -> None:
        """The in-cluster health check (repair.healthCheck): its namespace, then its objects, whose Roles live in
        the operator's and the smoke test's namespaces (`after`), and its alerts."""
        cfg = args.stack
        health = cfg.repair.health_check
        if args.health_check is None:
            raise ValueError("repair.healthCheck.enabled needs the check's code and facts (GpuPlatformArgs)")
        objects = build_health_check(
            health,
            args.health_check,
            operator_namespace=cfg.gpu_operator.namespace,
            time_slicing_configmap=TIME_SLICING_CONFIGMAP,
            smoke_namespace=cfg.smoke_test.namespace if cfg.smoke_test.enabled else None,
        )
        health_namespace = self._object("health-namespace", objects[0])
        placed = self._after(health_namespace, *after)
        for obj in objects[1:]:
            where = obj["metadata"].get("namespace", "")
            suffix = f"-{where}" if obj["kind"] in ("Role", "RoleBinding") else ""
            self._object(f"health-{obj['kind'].lower()}{suffix}", obj, placed)
        if cfg.monitoring.alerts_enabled:
            rules = build_health_alert_rules(
                cfg.monitoring, health, stack=args.stack_name, labels=prometheus_rule_labels(cfg.monitoring)
            )
            self._object("health-alert-rules", rules)

    def _quotas(self, cfg: StackConfig) -> None:
        for quota in build_gpu_quotas(cfg.gpu_quotas):
            self._object(f"quota-{quota['metadata']['namespace']}", quota)
        if not cfg.gpu_quotas.selectors:
            return
        # The background controller creates the quotas: its RBAC comes first, whichever policy type.
        rbac = self._object("kyverno-quota-rbac", build_kyverno_quota_rbac())
        if cfg.kyverno.policy_api == "cel":
            for rule, policy in zip(
                cfg.gpu_quotas.selectors, build_gpu_quota_generating_policies(cfg.gpu_quotas), strict=True
            ):
                self._object(f"gpu-quota-policy-{rule.name}", policy, self._after(rbac))
        else:
            quota_policy = build_gpu_quota_generate_policy(cfg.gpu_quotas)
            assert quota_policy is not None  # selectors exist
            self._object("gpu-quota-policy", quota_policy, self._after(rbac))


def _release(cfg: StackConfig, *, crds_registered: bool) -> dict[str, Any]:
    """The operator's Helm release. helm.v3.Release, not helm.v4.Chart: the chart's pre-delete hooks (and, with a
    remote chart, its CRD upgrade hook) must run. A chart on disk is named by its path as the stack file gives it
    (relative to the project): an absolute path differs between machines and shows a chart change on every
    preview (pulumi-kubernetes#2573)."""
    operator_cfg = cfg.gpu_operator
    local_chart = operator_cfg.local_chart()
    release: dict[str, Any] = {
        "name": CHART_NAME,
        "chart": operator_cfg.chart or CHART_NAME,
        "version": operator_cfg.chart_version,
        # The CRDs are resources above: Helm must not create them behind the plan on first install.
        "skipCrds": local_chart is not None,
        "namespace": operator_cfg.namespace,
        "createNamespace": False,
        "values": stack_release_values(cfg, crds_registered=crds_registered),
        # Hooks (the CRD upgrade) still run to completion within the timeout; the silent wait for the workloads is
        # left to the operator-ready step, which reports what it sees.
        "skipAwait": True,
        "timeout": OPERATOR_WAIT_SECONDS,
    }
    if local_chart is None:
        release["repositoryOpts"] = {"repo": operator_cfg.chart_repository}
    return release
