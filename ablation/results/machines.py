"""Which machine a result ran on, as its record says: the model (for grouping and labels) and
the physical instance (two H200s of one model are two machines)."""

from __future__ import annotations

from ablation.results.record import MachineRecord
from ablation.results.store import ResultSet, TaskResult


def machine_label(machine: MachineRecord) -> str | None:
    """The GPU model (or CPU model) one result recorded; None when it recorded neither."""
    return (machine.gpus[0].name if machine.gpus else machine.cpu_model) or None


def machine_instance(machine: MachineRecord) -> str | None:
    """Which physical machine one result ran on: its GPUs' UUIDs (short), else the hostname (lent
    GPU machines all call themselves `vm`); None when the result recorded neither."""
    uuids = sorted(g.uuid for g in machine.gpus if g.uuid)
    if uuids:
        return ",".join(u.removeprefix("GPU-")[:8] for u in uuids)
    return machine.hostname or None


def machine_name(rs: ResultSet) -> str:
    """The GPU model (or CPU model) the results were measured on."""
    return next((label for r in rs.results if (label := machine_label(r.record.machine))), "unknown")


def machine_of(r: TaskResult) -> str:
    """GPU model (with the count when several) or CPU model, as the result recorded it."""
    gpus = r.record.machine.gpus
    label = machine_label(r.record.machine) or "unknown machine"
    return label + (f" x{len(gpus)}" if len(gpus) > 1 else "")
