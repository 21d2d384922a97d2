"""What this machine is: host, CPU, GPUs (through NVML when present).

Used for SKIP decisions (a scenario's `requires`) and for the environment that
goes into every result. On a machine without NVIDIA GPUs, NVML is absent and
the machine reports platform "cpu" with no GPUs.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: float
    memory_total_mib: int | None  # None: not known (a machine described to `scenarios check` without it)
    clocks_locked: bool | None
    sm_clock_mhz: int | None
    uuid: str


@dataclass(frozen=True)
class Machine:
    hostname: str
    cpu_model: str
    cpu_count: int
    memory_gib: float
    driver: str | None = None
    cuda_driver: str | None = None
    gpus: list[Gpu] = field(default_factory=list)

    @property
    def platform(self) -> str:
        return "cuda" if self.gpus else "cpu"

    @property
    def arch(self) -> str:
        """What kind of machine this is, as a Ray resource name can carry it: the GPU model and
        compute capability (`nvidia-h200-sm90`), else `cpu-` and the CPU model."""
        if self.gpus:
            g = self.gpus[0]
            return f"{_slug(g.name)}-sm{int(round(g.compute_capability * 10))}"
        return f"cpu-{_slug(self.cpu_model)}"[:48]

    def as_dict(self) -> dict:
        d = asdict(self)
        d["platform"] = self.platform
        return d

    def unmet(self, requires, tp: int = 1) -> str | None:
        """Why a scenario's `requires` (and its tensor-parallel degree `tp`) is not met here, or None
        if it is. The one SKIP rule: the sweep and `ablation scenarios check` both ask this.

        On a CUDA machine tp ranks are GPUs, so a tp larger than the GPU count is SKIP. On a CPU
        machine tp ranks are processes on CPUs (what `min_cpus` states), so tp is not judged here."""
        why = f" ({requires.reason})" if requires.reason else ""
        if requires.platform and requires.platform != self.platform:
            return f"needs platform {requires.platform}, this machine is {self.platform}{why}"
        if requires.min_cpus and self.cpu_count < requires.min_cpus:
            return f"needs {requires.min_cpus} CPUs, this machine has {self.cpu_count}{why}"
        if requires.min_gpus and len(self.gpus) < requires.min_gpus:
            return f"needs {requires.min_gpus} GPUs, this machine has {len(self.gpus)}{why}"
        known = [g.memory_total_mib for g in self.gpus if g.memory_total_mib is not None]
        if requires.min_gpu_memory_gib and known:  # a GPU of unknown memory (described without it) is not judged
            smallest = min(known) / 1024
            if smallest < requires.min_gpu_memory_gib:
                return (f"needs {requires.min_gpu_memory_gib:g} GiB of memory on each GPU, this machine's "
                        f"{'smallest GPU has' if len(self.gpus) > 1 else 'GPU has'} {smallest:.1f} GiB{why}")
        if requires.min_compute_capability:
            cc = max((g.compute_capability for g in self.gpus), default=0.0)
            if cc < requires.min_compute_capability:
                return f"needs compute capability >= {requires.min_compute_capability}, this machine has {cc or 'none'}{why}"
        if self.platform == "cuda" and tp > len(self.gpus):
            return f"needs {tp} GPUs for tensor-parallel size {tp}, this machine has {len(self.gpus)}"
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: `taskset`, a cgroup cpuset), which is what
    a task started here gets; not the host's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


def _memory_gib() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        return 0.0


def _nvml_gpus() -> tuple[str | None, str | None, list[Gpu]]:
    try:
        import pynvml
    except ImportError:
        return None, None, []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None, None, []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            try:
                # NVML exposes no "locked" flag; application clocks set away from the
                # default is the visible trace of `nvidia-smi -ac` / clock locking.
                locked = pynvml.nvmlDeviceGetApplicationsClock(
                    h, pynvml.NVML_CLOCK_SM
                ) != pynvml.nvmlDeviceGetDefaultApplicationsClock(h, pynvml.NVML_CLOCK_SM)
            except pynvml.NVMLError:
                locked = None
            try:
                sm_clock = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
            except pynvml.NVMLError:
                sm_clock = None
            gpus.append(
                Gpu(
                    index=i,
                    name=pynvml.nvmlDeviceGetName(h),
                    compute_capability=float(f"{major}.{minor}"),
                    memory_total_mib=pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20,
                    clocks_locked=locked,
                    sm_clock_mhz=sm_clock,
                    uuid=pynvml.nvmlDeviceGetUUID(h),
                )
            )
        return driver, f"{cuda // 1000}.{cuda % 1000 // 10}", gpus
    finally:
        pynvml.nvmlShutdown()


def gpu_processes(indices: list[int]) -> list[tuple[int, int]]:
    """(gpu index, pid) of compute processes on the given GPUs; empty where there is no NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        found = []
        for i in indices:
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                found.append((i, p.pid))
        return found
    finally:
        pynvml.nvmlShutdown()


def probe() -> Machine:
    driver, cuda, gpus = _nvml_gpus()
    return Machine(
        hostname=platform.node(),
        cpu_model=_cpu_model(),
        cpu_count=_usable_cpus(),
        memory_gib=_memory_gib(),
        driver=driver,
        cuda_driver=cuda,
        gpus=gpus,
    )
