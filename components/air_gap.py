"""The air gap as a whole: every URL and image a node or the cluster fetches for this stack, where from, and the key
that points it at the lab's own copy (docs/air-gap.md, "What a lab with no route out must serve").

Before, `airGapped: true` was checked key by key: a stack with precompiled drivers and no apt mirror passed while
every first boot still ran apt against the archive, an installer mirror without its script still curled
get.rke2.io, and the chart and every image came from the internet unchecked (FIELD-REVIEW-6 IB-1, W-3). Here the
inventory is built from what the stack renders (the release's final values over the chart's own image table,
knowledge/gpu_operator_images.py; the first boot's installer and apt sources; the program's tool images), and with
`airGapped` each item no mirror serves is refused, naming it and its key. `make preview ARGS=--inventory` prints the
inventory: what to mirror, and from where.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from components.gpu_failure_domain.cloud_init import GITHUB_RELEASES, UBUNTU_ARCHIVE
from config.gpu_operator import GpuOperatorConfig
from config.proxmox import GUEST_OSES
from config.registries import RegistryMirrorConfig
from config.rke2 import DEFAULT_INSTALL_SCRIPT
from config.stack_parts import StackParts
from knowledge.gpu_operator_chart import CHART_NAME
from knowledge.gpu_operator_images import GATES, default_images, registry_of, value_at

# The registry RKE2's agent pulls its own runtime image from at boot (wharfie), and its system images.
RKE2_RUNTIME_IMAGE = "docker.io/rancher/rke2-runtime"


@dataclass(frozen=True)
class Fetched:
    """One thing the lab must serve: what it is, its public reference, who fetches it, the key that points it at
    the lab, and the lab's copy (None: fetched from the public place)."""

    what: str
    reference: str
    by: str
    key: str
    lab: str | None

    @property
    def image(self) -> bool:
        return self.key.startswith("gpu-pool:registryMirrors")


def _os_tag(parts: StackParts) -> str:
    guest = parts.proxmox.guest_os if parts.proxmox is not None and parts.proxmox.guest_os else GUEST_OSES[1]
    return guest.replace("-", "")


def _urls(parts: StackParts) -> Iterator[Fetched]:
    if parts.rke2 is not None:
        installer, version = parts.rke2.installer, parts.rke2.version
        script = installer.script
        yield Fetched(
            "the RKE2 install script",
            DEFAULT_INSTALL_SCRIPT,
            "every VM's first boot, the RKE2 upgrade step",
            "gpu-pool:rke2.installer.script",
            script if script != DEFAULT_INSTALL_SCRIPT else None,
        )
        folder = version.replace("+", "%2B")
        files = f"{folder}/sha256sum-amd64.txt and rke2.linux-amd64.tar.gz"
        yield Fetched(
            f"RKE2 {version}'s release files ({files})",
            f"{GITHUB_RELEASES}/{folder}/",
            "the install script",
            "gpu-pool:rke2.installer.artifacts",
            f"{installer.artifacts}/{folder}/" if installer.artifacts else None,
        )
    mirror = parts.apt_mirror
    driver_builds = parts.operator is not None and not parts.operator.use_precompiled
    who = "every VM's first boot (qemu-guest-agent)" + (
        ", the driver container (the kernel headers it builds nvidia.ko against)" if driver_builds else ""
    )
    yield Fetched("Ubuntu's archive", UBUNTU_ARCHIVE.uri, who, "gpu-pool:aptMirror.uri", mirror.uri if mirror else None)
    yield Fetched(
        "Ubuntu's security archive",
        UBUNTU_ARCHIVE.security,
        who,
        "gpu-pool:aptMirror.securityUri",
        mirror.security if mirror else None,
    )
    operator = parts.operator
    if operator is not None:
        public = GpuOperatorConfig.model_fields["chart_repository"].default
        lab = operator.chart or (operator.chart_repository if operator.chart_repository != public else None)
        yield Fetched(
            f"the {CHART_NAME} chart {operator.chart_version}",
            f"{public} ({CHART_NAME} {operator.chart_version})",
            "Helm, where `pulumi up` runs",
            "gpu-pool:gpuOperator.chart",
            lab,
        )


def _section_image(values: Mapping[str, Any], section: str, defaults: Mapping[str, str], chart: str) -> str:
    given = value_at(values, section)
    given = given if isinstance(given, Mapping) else {}
    part = {name: str(given.get(name) or defaults.get(name) or "") for name in ("repository", "image", "version")}
    version = part["version"] or chart
    if "/" in part["image"] or ":" in part["image"]:
        return part["image"]
    return f"{part['repository']}/{part['image']}:{version}"


def _switched_on(values: Mapping[str, Any], switches: Mapping[str, bool], path: str) -> bool:
    value = value_at(values, path)
    return bool(value) if isinstance(value, bool) else bool(switches.get(path, True))


def chart_images(parts: StackParts, values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(what, image) of every image the release deploys, from its final values over the chart's defaults."""
    operator = parts.operator
    table = default_images(operator.chart_version) if operator is not None else None
    if operator is None or table is None:
        return
    switches = table["switches"]
    for section, defaults in sorted(table["sections"].items()):
        top = section.split(".")[0]
        if not _switched_on(values, switches, f"{top}.enabled"):
            continue
        if section in GATES and not _switched_on(values, switches, GATES[section]):
            continue
        image = _section_image(values, section, defaults, operator.chart_version)
        if section == "driver":
            image = _driver_image(parts, image)
        yield f"the chart's {section}", image
    if _switched_on(values, switches, "nfd.enabled"):
        nfd = value_at(values, "node-feature-discovery.image")
        nfd = nfd if isinstance(nfd, Mapping) else {}
        repository = nfd.get("repository") or table["nfd"]["repository"]
        yield "the chart's node-feature-discovery", f"{repository}:{nfd.get('tag') or table['nfd']['tag']}"


def _driver_image(parts: StackParts, image: str) -> str:
    """The driver image the operator composes: `<version>-<os>`, or precompiled `<branch>-<kernel>-<os>` (one per
    kernel the domains pin; the VMs' running kernel where none is pinned)."""
    operator = parts.operator
    assert operator is not None
    os_tag = _os_tag(parts)
    if not operator.use_precompiled:
        return f"{image}-{os_tag}"
    kernels = sorted({domain.kernel for _, domain in parts.domains if domain.kernel}) or ["<the VMs' kernel>"]
    return ", ".join(f"{image}-{kernel}-{os_tag}" for kernel in kernels)


def _tool_images(parts: StackParts) -> Iterator[tuple[str, str]]:
    if parts.rke2 is not None:
        yield "RKE2's runtime (and its system images)", f"{RKE2_RUNTIME_IMAGE}:{parts.rke2.version.replace('+', '-')}"
    if parts.smoke is not None and parts.smoke.enabled:
        yield "the smoke test", parts.smoke.image
    repair = parts.repair
    if repair is not None and repair.health_check.enabled:
        yield "the health check", repair.health_check.image
    if repair is not None and repair.unattended.enabled:
        yield "the repair watcher and node-check", repair.unattended.image


def _mirror_of(mirrors: Mapping[str, RegistryMirrorConfig] | None, registry: str) -> tuple[str, str | None]:
    """(the key that covers the registry, the lab endpoint serving it or None)."""
    for name in (registry, "*"):
        if mirrors and name in mirrors:
            return f"gpu-pool:registryMirrors.{name}", mirrors[name].endpoint[0]
    return f"gpu-pool:registryMirrors.{registry}", None


def inventory(parts: StackParts, values: Mapping[str, Any] | None) -> list[Fetched]:
    """Everything a node or the cluster fetches for this stack."""
    items = list(_urls(parts))
    images = [*chart_images(parts, values or {}), *_tool_images(parts)]
    users: dict[str, list[str]] = {}
    for what, image in images:
        for reference in image.split(", "):
            users.setdefault(reference, []).append(what)
    for reference, whats in users.items():
        key, lab = _mirror_of(parts.registry_mirrors, registry_of(reference))
        items.append(Fetched(", ".join(whats), reference, "the nodes' containerd", key, lab))
    return items


def air_gap_problems(parts: StackParts, values: Mapping[str, Any] | None) -> list[str]:
    """With `airGapped`, each thing no lab copy serves, named with the key that would point it at one; the images
    of one registry together."""
    if not parts.air_gapped or (parts.proxy is not None and parts.proxy.enabled):
        return []  # a proxy beside airGapped is its own refusal (config/lab_rules.py)
    items = [item for item in inventory(parts, values) if item.lab is None]
    problems = [
        f"{item.key}: with gpu-pool:airGapped, {item.what} comes from {item.reference} ({item.by}), which a lab "
        f"with no route out cannot reach: {_fix(item)}"
        for item in items
        if not item.image
    ]
    by_key: dict[str, list[Fetched]] = {}
    for item in items:
        if item.image:
            by_key.setdefault(item.key, []).append(item)
    for key, images in by_key.items():
        registry = key.removeprefix("gpu-pool:registryMirrors.")
        shown = ", ".join(f"{item.reference} ({item.what})" for item in images)
        problems.append(
            f"{key}: with gpu-pool:airGapped, the nodes pull {shown} from {registry}, which has no mirror: add "
            f'{registry} (or "*") to gpu-pool:registryMirrors, a registry in the lab that holds them '
            "(`make preview ARGS=--inventory` lists what to copy)"
        )
    return problems


def _fix(item: Fetched) -> str:
    return {
        "gpu-pool:rke2.installer.script": "set it to your lab's copy of install.sh (docs/air-gap.md)",
        "gpu-pool:rke2.installer.artifacts": "set it to the folder on a lab server holding the release folders, "
        "laid out as GitHub's releases",
        "gpu-pool:aptMirror.uri": "set gpu-pool:aptMirror to the lab's Ubuntu archive mirror",
        "gpu-pool:aptMirror.securityUri": "set gpu-pool:aptMirror to the lab's Ubuntu archive mirror",
        "gpu-pool:gpuOperator.chart": "give the chart on disk (`make chart` fetches it where there is a route) or "
        "gpu-pool:gpuOperator.chartRepository a repository in the lab",
    }[item.key]


def inventory_text(items: list[Fetched]) -> str:
    """The inventory as a person reads it: one line per item, what, from where, and its lab copy or the key."""
    lines = ["what a node or the cluster fetches for this stack, and where from:"]
    for item in items:
        where = f"-> {item.lab}" if item.lab else f"-> (public; {item.key} points it at the lab)"
        lines.append(f"  {item.what}: {item.reference} {where}")
    return "\n".join(lines) + "\n"
