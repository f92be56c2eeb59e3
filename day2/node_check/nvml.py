"""A reading of NVML through nvidia-ml-py (`import pynvml`), in the shape `--nvml-json` reads back.

nvidia-ml-py is optional on a node: without it, or without the NVML library, node-check skips the nvml floor
and says why instead of failing it. Each value NVML does not support on a card is left out (None), never
guessed. The shape is what the lent H200's capture holds (tests/fixtures/node_check/h200/nvml.json).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class NvmlUnavailable(Exception):
    """NVML cannot be read here: the message says why (not installed, no library, no driver)."""


class NvmlVersionMismatch(Exception):
    """NVML's library and the loaded kernel module differ: the article's trap 7."""


def _value(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception:  # NVMLError_NotSupported and friends: the value is simply absent
        return None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def nvml_reading() -> dict[str, Any]:
    """Read every GPU NVML sees. Raises NvmlUnavailable / NvmlVersionMismatch."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise NvmlUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py), and no --nvml-json") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibRmVersionMismatch:
        raise NvmlVersionMismatch("NVML: Driver/library version mismatch") from None
    except pynvml.NVMLError as error:
        raise NvmlUnavailable(f"NVML did not start: {error}") from None
    try:
        gpus = [_gpu(pynvml, pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]
        return {
            "driver": _text(_value(pynvml.nvmlSystemGetDriverVersion)),
            "nvml": _text(_value(pynvml.nvmlSystemGetNVMLVersion)),
            "cuda": _value(pynvml.nvmlSystemGetCudaDriverVersion),
            "count": len(gpus),
            "gpus": gpus,
        }
    finally:
        _value(pynvml.nvmlShutdown)


def _gpu(nv: Any, handle: Any) -> dict[str, Any]:
    info = nv.nvmlDeviceGetPciInfo(handle)
    ecc_uncorrected = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    remapped = _value(lambda: nv.nvmlDeviceGetRemappedRows(handle))
    # Renamed in NVML 12.x; the old name stays for older nvidia-ml-py.
    reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
    reasons = reasons or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return {
        "name": _text(_value(lambda: nv.nvmlDeviceGetName(handle))),
        "pci": {
            "busId": _text(info.busId),
            "pciDeviceId": info.pciDeviceId,
            "pciSubSystemId": info.pciSubSystemId,
        },
        "virtualizationMode": _value(lambda: nv.nvmlDeviceGetVirtualizationMode(handle)),
        "persistenceMode": _value(lambda: nv.nvmlDeviceGetPersistenceMode(handle)),
        "currLinkGen": _value(lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
        "maxLinkGen": _value(lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
        "currLinkWidth": _value(lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        "maxLinkWidth": _value(lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        "eccMode": _value(lambda: list(nv.nvmlDeviceGetEccMode(handle))),
        "eccVolatileUncorrected": _value(
            lambda: nv.nvmlDeviceGetTotalEccErrors(handle, ecc_uncorrected, nv.NVML_VOLATILE_ECC)
        ),
        "eccAggregateUncorrected": _value(
            lambda: nv.nvmlDeviceGetTotalEccErrors(handle, ecc_uncorrected, nv.NVML_AGGREGATE_ECC)
        ),
        "remappedRows": list(remapped) if remapped is not None else None,
        "throttleReasons": _value(lambda: reasons(handle)),
    }
