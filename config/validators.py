"""String checks shared by the config models (DNS names, hex ids, URLs); each message says what is expected."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlparse

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_1123_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F](\.[0-7])?$")
VENDOR_DEVICE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$")
# Kubernetes label syntax (apimachinery IsQualifiedName / IsValidLabelValue).
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def dns_label(value: str) -> str:
    if not DNS_LABEL.match(value):
        raise ValueError(
            "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, "
            "at most 63 characters"
        )
    return value


def dns_1123_name(value: str) -> str:
    if not DNS_1123_SUBDOMAIN.match(value):
        raise ValueError(
            "must be a DNS-1123 name (lowercase letters, digits, '-' and '.', at most 253 characters): "
            "it becomes the Kubernetes node name"
        )
    return value


SHORT_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{2}:[0-1][0-9a-fA-F](\.[0-7])?$")


def pci_address(value: str) -> str:
    if SHORT_PCI_ADDRESS.match(value):
        # `lspci` prints the address without its PCI domain; Proxmox's mapping needs it.
        raise ValueError(f"is lspci's short form; Proxmox wants the PCI domain too: '0000:{value.lower()}'")
    if not PCI_ADDRESS.match(value):
        raise ValueError("is not a PCI address; expected DDDD:BB:DD or DDDD:BB:DD.F in hex, e.g. 0000:01:00")
    slot, dot, function = value.lower().partition(".")
    if dot and function != "0":
        # A card's GPU is its function 0; .1 is its HDMI audio (or USB) function, which a mapping of that path alone
        # would pass into the VM without the GPU.
        raise ValueError(
            f"names function .{function} of the card, and its GPU is function .0: write {slot} (the whole card, its "
            "audio function with it) or " + f"{slot}.0"
        )
    return value.lower()


def vendor_device_id(value: str) -> str:
    if not VENDOR_DEVICE.match(value):
        raise ValueError("is not a vendor:device id; expected vvvv:dddd in hex, e.g. 10de:25b0")
    return value.lower()


def https_url(value: str, *, port: int | None = None) -> str:
    parsed = urlparse(value)
    if parsed.scheme != "https" or not parsed.hostname:
        raise ValueError("must be an https:// URL")
    if port is not None and parsed.port != port:
        raise ValueError(f"must name port {port} explicitly, e.g. https://<server>:{port}")
    return value.rstrip("/")


def label_key(value: str) -> str:
    """A Kubernetes label (or taint) key: `[prefix/]name`, e.g. `nodepool` or `nvidia.com/gpu`."""
    prefix, slash, name = value.rpartition("/")
    if slash and not DNS_1123_SUBDOMAIN.match(prefix):
        raise ValueError(
            f"label key {value!r} has an invalid prefix {prefix!r}: it must be a DNS subdomain "
            "(lowercase letters, digits, '-' and '.'), e.g. nvidia.com/gpu"
        )
    if not LABEL_NAME.match(name):
        raise ValueError(
            f"label key {value!r} is not a valid label name: [prefix/]name where name is at most 63 letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit, e.g. nodepool"
        )
    return value


def label_value(value: str, *, key: str | None = None) -> str:
    """A Kubernetes label value: at most 63 letters, digits, '-', '_', '.', alphanumeric at both ends (may be empty)."""
    if not LABEL_VALUE.match(value):
        of = f"label {key!r} has an invalid value {value!r}" if key else f"{value!r} is an invalid label value"
        raise ValueError(
            f"{of}: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
    return value


def labels(value: dict[str, str]) -> dict[str, str]:
    for key, item in value.items():
        label_key(key)
        label_value(item, key=key)
    return value


def dns_labels(values: Iterable[str], what: str = "namespace") -> None:
    for item in values:
        try:
            dns_label(item)
        except ValueError as error:
            raise ValueError(f"{what} {item!r} {error}") from None


# OpenSSH's public key algorithms for authorized_keys (sshd(8), "AUTHORIZED_KEYS FILE FORMAT"; ssh-dss is left
# out: OpenSSH disables DSA keys by default since 7.0, and Ubuntu 24.04 ships 9.6).
SSH_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)


def ssh_public_key_problem(line: str) -> str | None:
    """Why an authorized_keys line is not a usable public key, or None.

    A line is `[options] <type> <base64 key blob> [comment]`; the blob starts with the type again, as an SSH string
    (RFC 4253 section 6.6: uint32 length, then the name), so a key cut short or pasted into the wrong type fails
    here instead of in `ssh` on day 2, when cloud-init has long run.
    """
    import base64
    import binascii

    tokens = line.split()
    types = [index for index, token in enumerate(tokens) if token in SSH_KEY_TYPES]
    if not types:
        return (
            "is not an SSH public key: expected `<type> <key> [comment]`, e.g. `ssh-ed25519 AAAAC3Nz... me@laptop` "
            f"(the .pub file's one line), with a type of {', '.join(SSH_KEY_TYPES[:3])}..."
        )
    index = types[0]
    key_type = tokens[index]
    if index + 1 >= len(tokens):
        return f"is only the key type {key_type!r}, without the key: paste the whole line of the .pub file"
    blob = tokens[index + 1]
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return f"has an {key_type} key that is not valid base64 (cut short or wrapped?): paste the .pub line whole"
    length = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else -1
    embedded = raw[4 : 4 + length].decode("ascii", "replace") if length > 0 else ""
    if embedded != key_type or len(raw) < 4 + length + 16:
        return (
            f"has an {key_type} key whose data does not hold a {key_type} key (cut short, or another key's type): "
            "paste the .pub file's line whole"
        )
    return None


# Namespaces every cluster has. gpu-pool creates the namespaces it runs in (the operator's, the smoke test's) and a
# destroy deletes them: one of these would fail `up` ("already exists"), or worse, be deleted with the stack.
CLUSTER_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def own_namespace(value: str, example: str) -> str:
    """A namespace the stack creates and owns: a DNS label, and not one the cluster already has."""
    dns_label(value)
    if value in CLUSTER_NAMESPACES:
        raise ValueError(
            f"{value!r} is a namespace every cluster has, and gpu-pool creates this namespace and deletes it with "
            f"the stack: `up` would fail ('already exists'), a destroy would take {value} with it; name one of its "
            f"own, e.g. {example}"
        )
    return value
