"""String checks shared by the config models (DNS names, hex ids, URLs); each message says what is expected."""

from __future__ import annotations

import re
from urllib.parse import urlparse

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_1123_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F](\.[0-7])?$")
VENDOR_DEVICE = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$")


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


def pci_address(value: str) -> str:
    if not PCI_ADDRESS.match(value):
        raise ValueError("is not a PCI address; expected DDDD:BB:DD or DDDD:BB:DD.F in hex, e.g. 0000:01:00")
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
