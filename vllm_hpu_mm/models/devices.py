"""Device memory: known accelerators with the totals their runtimes report, and lazy readers of the real memory.

A named device plans against the total the runtime itself reports for one card (what ``mem_get_info`` or the
runtime's log prints), not the vendor's decimal headline: an "80 GB" H100 reports 79.19 GiB. Each total carries
its source. Nothing here imports torch or habana_frameworks at module load; a reader imports what it needs.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from vllm_hpu_mm.errors import BackendError, ConfigError
from vllm_hpu_mm.values import GIB, Backend

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEVICE_CHOICES",
    "DEVICE_TOTALS",
    "KNOWN_DEVICES",
    "LOG_DEVICES",
    "READING_SOURCE",
    "DeviceSpec",
    "MemoryReading",
    "backend_of",
    "device_spec",
    "read_cpu",
    "read_cuda",
    "read_device",
    "read_hpu",
    "reading_spec",
]

GB = 10**9


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One device of the plan. ``backend`` picks the graph model: hpu, cuda or cpu."""

    name: str
    backend: Backend
    total_bytes: int
    #: vLLM's default KV block size on this backend (tokens per block).
    block_size: int
    #: Where ``total_bytes`` comes from (a runtime reading, a public log, or a nominal figure), shown in the plan.
    source: str = ""
    #: The card's nominal memory in GiB (hl-smi's total), where it differs from what the runtime reports and plans.
    nominal_gib: float | None = None


def _gib(value: float) -> int:
    """Bytes of a total printed in GiB with two decimals (the figure is all the sources give)."""
    return round(value * GIB)


#: vLLM's default block size per backend (vLLM 0.32 CacheConfig / platforms/cpu.py: 16 on CUDA, 128 on CPU;
#: vllm-gaudi 091bbadd platform.py: 128 on HPU).
DEFAULT_BLOCK_SIZE: dict[Backend, int] = {"cuda": 16, "cpu": 128, "hpu": 128}

#: One card's total as its runtime reports it.
KNOWN_DEVICES: dict[str, DeviceSpec] = {
    d.name: d
    for d in (
        DeviceSpec("gaudi2", "hpu", _gib(94.62), 128,
                   "94.62 GiB: HPU total in HabanaAI/vllm-fork logs ('... GiB/94.62 GiB used', vllm-fork issue 345, "
                   "tests/data/logs/vllm_fork_345_gaudi_no_oom.log; hl-smi: 98304 MiB)", 96),
        DeviceSpec("gaudi3", "hpu", _gib(126.55), 128,
                   "126.55 GiB: from a public Gaudi3 log (HabanaAI/vllm-fork plugin/vllm-hpu README, "
                   "tests/data/gaudi_logs/dev/vllm_hpu_plugin_llama31_8b_gaudi3.log): 6399 KV blocks of 16 MiB at "
                   "utilisation 0.9 leave 111.10 GiB free after Llama-3.1-8B's 14.96 GiB and the profiling run's "
                   "0.49 GiB; vllm-gaudi issue #1736 states ~126.5 GiB per card (hl-smi: 131072 MiB)", 128),
        DeviceSpec("h100", "cuda", _gib(79.19), 16,
                   "79.19 GiB: torch.cuda.mem_get_info total of an H100 80GB HBM3 (PyTorch OOM messages 'total "
                   "capacity of 79.19 GiB'; nvidia-smi: 81559 MiB)"),
        DeviceSpec("h200", "cuda", _gib(139.80), 16,
                   "139.80 GiB: torch.cuda.mem_get_info total of an H200 141GB (PyTorch OOM messages 'total capacity "
                   "of 139.80 GiB' in public H200 logs)"),
    )
}  # fmt: skip
DEVICE_CHOICES = (*KNOWN_DEVICES, "cpu", "auto")
#: The totals the plan uses, in words (the --device help is written from the table, so the two never differ).
DEVICE_TOTALS = ", ".join(
    f"{d.name} {d.total_bytes / GIB:.2f} GiB" + (f" of {d.nominal_gib:g} GiB nominal" if d.nominal_gib else "")
    for d in KNOWN_DEVICES.values()
)
#: The devices a profile can be recorded for: those ``memory plan --device`` names (not ``auto``: a log ran on one).
LOG_DEVICES = (*KNOWN_DEVICES, "cpu")
#: What reads the memory of each backend (``auto``, ``cpu``).
READING_SOURCE: dict[Backend, str] = {
    "hpu": "torch.hpu.mem_get_info",
    "cuda": "torch.cuda.mem_get_info",
    "cpu": "psutil.virtual_memory",
}


@dataclasses.dataclass(frozen=True)
class MemoryReading:
    """Total and free bytes as the runtime reports them (before our model is loaded)."""

    backend: Backend
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
    return MemoryReading("hpu", int(total), int(free), READING_SOURCE["hpu"])


def read_cuda() -> MemoryReading | None:
    torch = _module("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    return MemoryReading("cuda", int(total), int(free), READING_SOURCE["cuda"])


def read_cpu() -> MemoryReading:
    import psutil

    vm = psutil.virtual_memory()
    return MemoryReading("cpu", int(vm.total), int(vm.available), READING_SOURCE["cpu"])


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


def reading_spec(reading: MemoryReading) -> DeviceSpec:
    """The device a runtime reading describes (``--device auto``, ``cpu``)."""
    return DeviceSpec(reading.backend, reading.backend, reading.total_bytes, DEFAULT_BLOCK_SIZE[reading.backend],
                      f"{reading.total_bytes / GIB:.2f} GiB read now with {reading.source}")  # fmt: skip


def device_spec(name: str, *, source: str = "--device") -> DeviceSpec:
    """A known device by name (case-insensitive), or ``cpu`` (host memory read with psutil)."""
    key = name.strip().lower()
    if key == "cpu":
        return reading_spec(read_cpu())
    if key not in KNOWN_DEVICES:
        raise ConfigError(f"{source}={name!r} is not a known device; accepted: {', '.join(DEVICE_CHOICES)}")
    return KNOWN_DEVICES[key]


def backend_of(name: str, *, source: str = "--device") -> Backend:
    """The backend a ``--device`` value plans for: a known device's or ``cpu`` as named, ``auto`` the accelerator
    read here (the one :func:`read_device` reads); a name no device has is refused as :func:`device_spec` does."""
    key = name.strip().lower()
    if key == "auto":
        return read_device("auto").backend
    return "cpu" if key == "cpu" else device_spec(name, source=source).backend
