"""Pre-flight: what a machine will run of a scenario table, and what will be SKIP and why, before any
venv is built or GPU time is spent (`ablation scenarios check`).

The SKIP decision is `Machine.unmet(requires, tp)`, the very call the sweep makes; nothing here
judges a model a second way. The machine is this one (probed) or a described one (`described`),
e.g. the one-GPU Hopper box a table is about to be sent to.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path

from ablation.errors import AblationError
from ablation.execution.machine import Gpu, Machine, _usable_cpus
from ablation.execution.plan import Planner
from ablation.spec.scenarios import ScenarioFile
from ablation.spec.stacks import StackDir


@dataclass(frozen=True)
class Row:
    """One table row: a model's workload, under the name tables print (its label, else its key)."""

    key: str
    label: str
    kind: str
    shape: str


@dataclass(frozen=True)
class ModelCheck:
    index: int
    id: str
    tp: int
    dtype: str
    skip: str | None  # why this machine cannot run it (Machine.unmet), None: it runs
    rows: list[Row]
    source_problem: str | None = None  # a runnable model whose directory the sweep would refuse


@dataclass(frozen=True)
class LegCheck:
    given: str
    path: Path | None = None
    error: str | None = None  # the stack file does not load: the loader's one line
    summary: str = ""
    refused_here: str | None = None  # the sweep refuses this leg on this machine, and why
    variants: list[str] = field(default_factory=list)  # per-model override lines


@dataclass(frozen=True)
class Preflight:
    scenarios: ScenarioFile
    machine_desc: str
    models: list[ModelCheck]
    legs: list[LegCheck]
    repeats: int

    @property
    def rows(self) -> list[tuple[ModelCheck, Row]]:
        return [(m, r) for m in self.models for r in m.rows]

    @property
    def ready(self) -> bool:
        """Nothing the sweep would refuse: every given leg loads and is usable here, every runnable
        model's directory is there."""
        return (all(not (leg.error or leg.refused_here) for leg in self.legs)
                and all(not m.source_problem for m in self.models))


def described_machine(gpus: int, compute_capability: float | None, cpus: int | None = None,
                      memory_gib: float | None = None) -> Machine:
    """A machine as a user describes it: `gpus` GPUs of one compute capability (0: a CPU machine),
    each with `memory_gib` of memory (None: not described, so `min_gpu_memory_gib` is not judged)."""
    if gpus < 0:
        raise AblationError(f"--gpus: {gpus} is negative; give the number of GPUs (0 for a CPU machine)")
    if gpus and compute_capability is None:
        raise AblationError("--compute-capability: required with --gpus N > 0 (e.g. 9.0 for H200, 10.0 for B200)")
    if not gpus and compute_capability is not None:
        raise AblationError("--compute-capability: a machine with --gpus 0 has no GPUs to have one")
    if compute_capability is not None and not 1.0 <= compute_capability < 100.0:
        raise AblationError(f"--compute-capability: {compute_capability} is not a compute capability (X.Y, e.g. 9.0)")
    if cpus is not None and cpus < 1:
        raise AblationError(f"--cpus: {cpus} is not a CPU count (at least 1)")
    if memory_gib is not None and (not gpus or not 0 < memory_gib < 2**20):
        raise AblationError(f"--gpu-memory-gib: {memory_gib} is not the memory of a described GPU (GiB, with --gpus N > 0)")
    mib = round(memory_gib * 1024) if memory_gib is not None else None
    gpu_list = [Gpu(i, f"described sm{int(round(compute_capability * 10))}", compute_capability, mib, None, None,
                    f"described-{i}") for i in range(gpus)] if gpus else []
    return Machine(hostname="described", cpu_model="described", cpu_count=cpus or _usable_cpus(),
                   memory_gib=0.0, gpus=gpu_list)


def describe(machine: Machine, described: bool) -> str:
    gpus = machine.gpus
    if gpus:
        ccs = sorted({g.compute_capability for g in gpus})
        what = f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''} of compute capability {', '.join(map(str, ccs))}"
        mems = sorted({g.memory_total_mib for g in gpus if g.memory_total_mib is not None})
        what += (f", {', '.join(f'{m / 1024:.1f}' for m in mems)} GiB each" if mems
                 else " (GPU memory not described: min_gpu_memory_gib not judged)")
    else:
        what = "no GPUs (platform cpu)"
    who = "described" if described else f"this machine ({machine.hostname or platform.node()})"
    return f"{who}: {what}, {machine.cpu_count} CPUs"


def _media_text(media) -> str:
    if media is None:
        return ""
    d = media.model_dump(exclude_none=True) if hasattr(media, "model_dump") else dict(media)
    kind = d.pop("type", "media")
    if kind == "image":
        return f" + image {d.get('width')}x{d.get('height')}"
    if kind == "video":
        return f" + video {d.get('frames')} frames {d.get('width')}x{d.get('height')} @ {d.get('fps')} fps"
    if kind == "audio":
        return f" + audio {d.get('seconds')} s @ {d.get('sample_rate')} Hz"
    return f" + {kind} " + ", ".join(f"{k} {v}" for k, v in sorted(d.items()))


def _row(key: str, w) -> Row:
    label = getattr(w, "label", None) or key
    if w.kind == "throughput":
        lo, hi = w.input_len.min, w.input_len.max
        shape = f"{w.num_prompts} requests x {lo if lo == hi else f'{lo}-{hi}'} in -> {w.output_len} out"
    else:
        shape = f"batch {w.batch_size} x {w.input_len} in -> {w.output_len} out"
    return Row(key, label, w.kind, shape + _media_text(getattr(w, "media", None)))


def _source_problem(scenarios: ScenarioFile, index: int, spec) -> str | None:
    """What the sweep's model preparation would refuse for a runnable model (a path without config.json)."""
    if spec.source.path is None:
        return None
    path = Path(spec.source.path)
    if not path.is_absolute():
        path = (scenarios.path.parent / path).resolve()
    if not (path / "config.json").is_file():
        return f"field 'models.{index}.source.path': {path} has no config.json"
    return None


def _leg(given: str, stacks: StackDir, machine: Machine, table) -> LegCheck:
    try:
        sf = stacks.load(given)
    except AblationError as exc:
        return LegCheck(given, error=str(exc))
    s = sf.stack
    summary = f"{sf.path} loads: {s.engine} {s.engine_version}, platform {s.platform}, python {s.python}"
    refused = None
    try:  # the sweep's own rule, so the check says exactly what the sweep would
        Planner.check_platform(sf, machine, None)
    except AblationError as exc:
        refused = str(exc)
    ids = {m.id for m in table.models}
    variants = []
    for m in table.models:
        o = s.override_for(m.id)
        if o:
            pins = ", ".join(f"{k} {v}" for k, v in o.pins.items())
            variants.append(f"variant {o.name} ({pins}) applies to {m.id}")
    for o in s.overrides:
        if not ids & set(o.models):
            variants.append(f"variant {o.name} names {', '.join(o.models)}: none is in this table (check the ids)")
    return LegCheck(given, sf.path, None, summary, refused, variants)


def check(scenarios: ScenarioFile, machine: Machine, described: bool = False, legs: list[str] | None = None,
          stacks: StackDir | None = None, repeats: int = 1) -> Preflight:
    """Judge every model of the table on `machine` exactly as the sweep does (Machine.unmet)."""
    if repeats < 1:
        raise AblationError(f"--repeats: {repeats} must be at least 1")
    table = scenarios.table
    models = []
    for i, m in enumerate(table.models):
        skip = machine.unmet(m.requires, m.tp)
        rows = [_row(w, table.workloads[w]) for w in m.workloads]
        models.append(ModelCheck(i, m.id, m.tp, m.dtype, skip, rows,
                                 None if skip else _source_problem(scenarios, i, m)))
    leg_checks = [_leg(g, stacks, machine, table) for g in (legs or [])] if stacks else []
    return Preflight(scenarios, describe(machine, described), models, leg_checks, repeats)


def render(p: Preflight) -> list[str]:
    table = p.scenarios.table
    out = [f"{p.scenarios.path}: table '{table.name}' (sha256 {p.scenarios.sha256[:12]}), "
           f"{len(p.models)} models, {len(p.rows)} rows",
           f"machine: {p.machine_desc}", ""]
    for m in p.models:
        verdict = "SKIP" if m.skip else "RUN "
        why = f": {m.skip}" if m.skip else ""
        out.append(f"{verdict} {m.id}  tp {m.tp}  {m.dtype}{why}")
        if m.source_problem:
            out.append(f"     the sweep would refuse it: {p.scenarios.path}: {m.source_problem}")
        for r in m.rows:
            name = r.label if r.label == r.key else f"{r.label} (key {r.key})"
            out.append(f"       {r.kind:10}  {name:34}  {r.shape}")
    run = [m for m in p.models if not m.skip]
    rows, run_rows = p.rows, [x for x in p.rows if not x[0].skip]
    n_tp = sum(1 for _, r in rows if r.kind == "throughput")
    run_tp = sum(1 for _, r in run_rows if r.kind == "throughput")
    out += ["",
            f"rows: {len(run_rows)} of {len(rows)} runnable here ({run_tp} of {n_tp} throughput, "
            f"{len(run_rows) - run_tp} of {len(rows) - n_tp} latency); {len(rows) - len(run_rows)} SKIP",
            f"models: {len(run)} of {len(p.models)} runnable here; {len(p.models) - len(run)} SKIP"]
    per = f"{len(p.models)} per leg and repeat ({len(run)} run, {len(p.models) - len(run)} SKIP)"
    if p.legs:
        n = len(p.legs) * p.repeats
        out.append(f"tasks (one per model x leg x repeat; a SKIP task is recorded, not run): {per}; "
                   f"{len(p.legs)} legs x {p.repeats} repeat{'s' if p.repeats != 1 else ''} = {n * len(p.models)} tasks "
                   f"({n * len(run)} run, {n * (len(p.models) - len(run))} SKIP)")
    else:
        out.append(f"tasks (one per model x leg x repeat; a SKIP task is recorded, not run): {per}; "
                   "give --leg to count a sweep's")
    for leg in p.legs:
        if leg.error:
            out.append(f"leg {leg.given}: does not load: {leg.error}")
            continue
        out.append(f"leg {leg.given}: {leg.summary}")
        if leg.refused_here:
            out.append(f"  the sweep refuses it here: {leg.refused_here}")
        out += [f"  {v}" for v in leg.variants] or ["  no per-model variant applies"]
    return out
