"""Device memory: a small table of known accelerators (nominal sizes) and lazy readers of the real free memory.

Nothing here imports torch or habana_frameworks at module load; a reader imports what it needs when called.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from vllm_hpu_mm.errors import BackendError, ConfigError

GB = 10**9
GIB = 2**30


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One device of the plan. ``backend`` picks the graph model: hpu, cuda or cpu."""

    name: str
    backend: str
    total_bytes: int
    #: vLLM's default KV block size on this backend (tokens per block).
    block_size: int


#: Nominal memory of known devices (the vendors' headline figures, GB = 1e9 bytes); the usable amount is lower.
KNOWN_DEVICES: dict[str, DeviceSpec] = {
    d.name: d
    for d in (
        DeviceSpec("gaudi2", "hpu", 96 * GB, 128),
        DeviceSpec("gaudi3", "hpu", 128 * GB, 128),
        DeviceSpec("h100", "cuda", 80 * GB, 16),
        DeviceSpec("h200", "cuda", 141 * GB, 16),
    )
}
DEVICE_CHOICES = (*KNOWN_DEVICES, "cpu", "auto")


@dataclasses.dataclass(frozen=True)
class MemoryReading:
    """Total and free bytes as the runtime reports them (before our model is loaded)."""

    backend: str
    total_bytes: int
    free_bytes: int
    source: str


def _module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except Exception:  # an absent or broken vendor stack means "not this backend"
        return None


def read_hpu() -> MemoryReading | None:
    """Gaudi: ``torch.hpu.mem_get_info`` once habana_frameworks has registered the device."""
    if _module("habana_frameworks.torch") is None:
        return None
    torch = importlib.import_module("torch")
    if not torch.hpu.is_available():
        return None
    free, total = torch.hpu.mem_get_info()
    return MemoryReading("hpu", int(total), int(free), "torch.hpu.mem_get_info")


def read_cuda() -> MemoryReading | None:
    torch = _module("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return MemoryReading("cuda", int(total), int(free), "torch.cuda.mem_get_info")


def read_cpu() -> MemoryReading:
    import psutil

    vm = psutil.virtual_memory()
    return MemoryReading("cpu", int(vm.total), int(vm.available), "psutil.virtual_memory")


def read_device(backend: str = "auto") -> MemoryReading:
    """The first available of HPU, CUDA, CPU (``auto``), or the named backend; raises if it is absent."""
    readers = {"hpu": read_hpu, "cuda": read_cuda, "cpu": read_cpu}
    order = ("hpu", "cuda", "cpu") if backend == "auto" else (backend,)
    for name in order:
        if name not in readers:
            raise ConfigError(f"device backend {name!r} is unknown; accepted: auto, hpu, cuda, cpu")
        reading = readers[name]()
        if reading is not None:
            return reading
    raise BackendError(f"no {backend} device is available on this machine; name a known device or give its memory")


def device_spec(name: str, *, source: str = "--device") -> DeviceSpec:
    """A known device by name (case-insensitive), or ``cpu`` (host memory read with psutil)."""
    key = name.strip().lower()
    if key == "cpu":
        reading = read_cpu()
        return DeviceSpec("cpu", "cpu", reading.total_bytes, 16)
    if key not in KNOWN_DEVICES:
        raise ConfigError(f"{source}={name!r} is not a known device; accepted: {', '.join(DEVICE_CHOICES)}")
    return KNOWN_DEVICES[key]
