"""`gpu-pool:trustedCa`: the lab's own certificate authority, one PEM bundle every client that talks to the lab
trusts (docs/air-gap.md, "A lab CA").

A lab's file server, Harbor and apt mirror are named `*.lab.internal` (or `.local`, `.lan`, `.home.arpa`, a private
address): no public CA issues a certificate for such a name, so they carry one from the lab's CA. Without it, the
VM's curl stops the first boot at the install script (exit 60, "SSL certificate problem"), and RKE2's agent fails
with an x509 error against the registry mirror (wharfie reads TLS only from registries.yaml `configs.<host>.tls`,
else the system roots). The bundle reaches cloud-init's `ca_certs` (the VM's system store: curl, apt, containerd),
registries.yaml `configs.<host>.tls.ca_file` of every mirror host, the files turn, and the GPU Operator's driver
container (`driver.certConfig`).

Each block is read by OpenSSL (Python's ssl module), the library the VM's curl and apt trust stores are read by:
what it cannot read is refused here, naming the block, instead of at first boot.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import ssl
from pathlib import Path

from config.text_file import NotUtf8Error, read_utf8

PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END ([A-Z0-9 ]+)-----", re.DOTALL)
CERTIFICATE = "CERTIFICATE"
# Names no public CA issues a certificate for (RFC 6762 .local, ICANN's .internal, RFC 8375 .home.arpa, and the
# lab's habit .lan): an https host under one carries the lab's own CA.
PRIVATE_SUFFIXES = (".internal", ".local", ".lan", ".home.arpa", ".localdomain", ".corp", ".intranet")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _der(body: str) -> bytes:
    return base64.b64decode("".join(body.split()), validate=True)


def _certificate_problem(der: bytes) -> str | None:
    """What OpenSSL says of one certificate's DER bytes, or None when it reads it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cadata=der)
    except ssl.SSLError as error:
        return f"OpenSSL cannot read it as an X.509 certificate ({error.reason or error})"
    return None


def pem_certificates(text: str) -> tuple[str, ...]:
    """The certificates of a PEM bundle, each as one canonical PEM block. ValueError naming the first bad block
    (by its number and line): text outside the blocks, a block that is no certificate (a private key above all),
    damaged base64, or bytes OpenSSL does not read as a certificate."""
    blocks = list(PEM_BLOCK.finditer(text))
    if not blocks:
        raise ValueError(
            "holds no PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----): give the lab CA's "
            "certificate file (e.g. ca.crt) or its text"
        )
    certificates: list[str] = []
    previous_end = 0
    for number, block in enumerate(blocks, start=1):
        where = f"block {number} (line {_line_of(text, block.start())})"
        stray = text[previous_end : block.start()].strip()
        previous_end = block.end()
        if stray:
            raise ValueError(
                f"has text before {where} that is not part of a PEM block ({stray.splitlines()[0][:40]!r}): a bundle "
                "is certificates alone, one after another"
            )
        kind, end_kind = block.group(1), block.group(3)
        if kind != end_kind:
            raise ValueError(f"{where} begins as {kind} and ends as {end_kind}: the file is cut or two were merged")
        if "PRIVATE KEY" in kind:
            raise ValueError(
                f"{where} is a private key (not shown): trustedCa takes the CA's certificate alone; never hand out "
                "a CA's key, it signs anything"
            )
        if kind != CERTIFICATE:
            raise ValueError(f"{where} is a {kind}, not a CERTIFICATE: give the CA's certificate")
        try:
            der = _der(block.group(2))
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: its base64 is damaged (a character lost or added in copying)") from None
        problem = _certificate_problem(der)
        if problem:
            raise ValueError(f"{where}: {problem}")
        encoded = base64.b64encode(der).decode()
        lines = "\n".join(encoded[i : i + 64] for i in range(0, len(encoded), 64))
        certificates.append(f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----\n")
    if text[previous_end:].strip():
        raise ValueError(f"has text after block {len(blocks)} that is not part of a PEM block")
    return tuple(certificates)


def looks_like_pem(value: str) -> bool:
    return "-----BEGIN" in value


def read_bundle(value: str) -> str:
    """`trustedCa` as given: PEM text, or a file path (~ expanded, relative to the project directory, where the
    Pulumi CLI runs the program). The bundle's text, certificates only, canonical."""
    if looks_like_pem(value):
        return "".join(pem_certificates(value))
    path = Path(value).expanduser()
    try:
        text = read_utf8(path)
    except FileNotFoundError:
        raise ValueError(
            f"{value!r} is neither PEM text nor a file that exists (a relative path is read from the project "
            "directory): give the lab CA's certificate file, e.g. certs/lab-ca.crt, or its PEM text"
        ) from None
    except NotUtf8Error as error:
        raise ValueError(f"{value!r}: {error} (a PEM file is ASCII; a .der file converts with openssl x509)") from None
    except OSError as error:
        raise ValueError(f"{value!r} cannot be read: {error.strerror}") from None
    try:
        return "".join(pem_certificates(text))
    except ValueError as error:
        raise ValueError(f"{value!r} {error}") from None


def certificates_of(bundle: str | None) -> tuple[str, ...]:
    """The canonical bundle (as `read_bundle` left it) split into its certificates."""
    if not bundle:
        return ()
    return tuple(f"{block.group(0)}\n" for block in PEM_BLOCK.finditer(bundle))


def is_private_host(host: str) -> bool:
    """A host no public CA issues a certificate for: a private, loopback or link-local address, a name under a
    private-use suffix, or a name of one label (resolved by the lab's own DNS search domain)."""
    name = host.strip("[]").lower().rstrip(".")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return "." not in name or name.endswith(PRIVATE_SUFFIXES)
    return address.is_private or address.is_loopback or address.is_link_local
