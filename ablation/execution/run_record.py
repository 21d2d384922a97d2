"""A run directory's own records: MANIFEST.json (written once; a resume adds MANIFEST.resume-N.json),
the check that a resumed run is the same study, and the conditions that make numbers less comparable."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ablation.errors import AblationError
from ablation.execution.local import Task
from ablation.execution.machine import Machine
from ablation.execution.plan import SweepOptions
from ablation.results import layout
from ablation.util.jsonio import write_json_atomic
from ablation.util.timestamps import utc_stamp


def check_resume_matches(run_dir: Path, opts: SweepOptions) -> None:
    """A resumed run must run the same table on the same legs, or its ratios would mix two studies."""
    manifest_path = layout.manifest_file(run_dir)
    if not manifest_path.is_file():
        return
    manifest = json.loads(manifest_path.read_text())
    recorded = manifest.get("scenario_table", {}).get("sha256")
    if recorded and recorded != opts.scenarios.sha256:
        raise AblationError(f"{opts.scenarios.path}: its sha256 {opts.scenarios.sha256[:12]} is not the table run "
                            f"'{run_dir.name}' started with ({recorded[:12]}); resume with that exact file")
    if manifest.get("legs") and sorted(manifest["legs"]) != sorted(opts.legs):
        raise AblationError(f"--leg: run '{run_dir.name}' was started with legs {', '.join(manifest['legs'])}; "
                            "resume with the same legs")
    if manifest.get("repeat_order", "round") != opts.repeat_order:
        raise AblationError(f"--repeat-order: run '{run_dir.name}' was started with --repeat-order "
                            f"{manifest.get('repeat_order', 'round')}; resume with the same order")
    if sorted(manifest.get("models") or []) != sorted(opts.models or []):
        given = ", ".join(manifest["models"]) if manifest.get("models") else "every model of the table"
        raise AblationError(f"--model: run '{run_dir.name}' was started with {given}; resume with the same --model")



def environment_warnings(machine: Machine) -> list[str]:
    """Conditions that make numbers less comparable; recorded, not fatal."""
    unlocked = [g.index for g in machine.gpus if not g.clocks_locked]
    if unlocked:
        return [f"GPU clocks not locked on GPU {', '.join(map(str, unlocked))}: expect more run-to-run noise "
                "(lock them with `nvidia-smi -lgc` for publication runs)"]
    return []



def write_manifest(run_dir: Path, opts: SweepOptions, tasks: list[Task], warnings: list[str],
                   machine: Machine) -> None:
    """Run-level MANIFEST: written once; a resumed run adds MANIFEST.resume-N.json beside it."""
    legs = {}
    for t in tasks:
        if t.env:
            key = t.env.path.name
            legs[key] = {k: t.env.manifest[k] for k in ("leg", "variant", "stack_file", "stack_sha256",
                                                         "lock_sha256", "python_version", "pins", "packages",
                                                         "excluded", "patches", "installer_version")}
    manifest = {
        "schema": "vllm-ablation/manifest/1",
        "created_at": utc_stamp(),
        "argv": sys.argv,
        "legs": opts.legs,
        "repeats": opts.repeats,
        "repeat_order": opts.repeat_order,
        "models": opts.models,  # None: every model of the table
        "scenario_table": {"path": str(opts.scenarios.path), "sha256": opts.scenarios.sha256,
                           "name": opts.scenarios.table.name},
        "machine": machine.as_dict(),
        "environments": legs,
        "warnings": warnings,
    }
    path = layout.manifest_file(run_dir)
    n = 1
    while path.exists():
        path = run_dir / f"MANIFEST.resume-{n}.json"
        n += 1
    write_json_atomic(path, manifest)
