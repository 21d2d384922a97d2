"""What a sweep will do, decided before anything runs: every bad input (unknown leg, a cuda leg
on a CPU machine, a missing model directory) fails here, so a typo never costs a half-finished
run; then the tasks in run order (round by round, model by model, the round's legs side by side; with
`--repeat-order model`, every round of one model before the next), with the venvs they need."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ablation.envs.builder import VenvBuilder
from ablation.errors import AblationError
from ablation.execution.hostlock import default_lock_path
from ablation.execution.local import Task
from ablation.execution.machine import Machine
from ablation.modeldirs.prepare import PreparedModel, prepare_model
from ablation.spec.scenarios import ScenarioFile
from ablation.spec.stacks import StackDir, StackFile
from ablation.util.timestamps import utc_stamp


@dataclass
class SweepOptions:
    legs: list[str]
    scenarios: ScenarioFile
    results_root: Path
    run_id: str | None = None
    resume: bool = False
    repeats: int = 1
    # "round": every model's repeat 1, then every model's repeat 2, ... (drift spreads over the whole
    # table); "model": all of one model's repeats before the next model's, so a run stopped early
    # (a leased machine) leaves each model it reached with every repeat, measured on one machine.
    repeat_order: str = "round"
    # Only these model ids of the table (None: all). The table itself, and so its sha256, is unchanged.
    models: list[str] | None = None
    timeout_override_s: float | None = None
    wait_for_lock: bool = False
    lock_path: Path = field(default_factory=default_lock_path)
    harness: Path | None = None  # only for fault injection (tests/fault_harness.py)
    executor: str = "local"  # local | ray
    ray_address: str | None = None
    # Leased machines end at a known time: start no task that the tasks before it predict cannot
    # finish before this many seconds from the sweep's start (execution/budget.py); the rest resumes later.
    stop_after_s: float | None = None
    # ... judging every next task that starts cold as at least this long where the tasks so far are
    # shorter (a cold start of a slower leg or a larger model that they do not predict; budget.starts_cold).
    expect_task_s: float | None = None
    # Ray only: run the table once per architecture the nodes advertise (["all"]: every one),
    # each into its own run directory `<run-id>@<arch>`, all at once on the cluster.
    archs: list[str] | None = None


@dataclass
class Resolved:
    """What validation found: the legs' stack files, skip reasons, prepared models.

    `machines` and `skip` are keyed by architecture (None: this machine, the local run): a
    scenario is SKIP where that architecture's machine cannot run it, wherever the head is."""

    stack_files: dict[str, StackFile]
    machines: dict[str | None, Machine]
    skip: dict[str | None, dict[str, str | None]]
    prepared: dict[str, PreparedModel]


def new_run_id() -> str:
    return utc_stamp("id")


def leg_order(legs: list[str], repeats: int) -> list[tuple[int, list[str]]]:
    """Rounds of legs, reversed every other round (A B C, C B A, ...) to cancel drift."""
    return [(r + 1, legs if r % 2 == 0 else list(reversed(legs))) for r in range(repeats)]


REPEAT_ORDERS = ("round", "model")


def task_order(models: list, legs: list[str], repeats: int, order: str = "round") -> list[tuple]:
    """(model, repeat, that round's legs) in run order: round by round over the whole table, or
    ("model") every round of one model before the next; legs alternate direction either way."""
    if order not in REPEAT_ORDERS:
        raise AblationError(f"--repeat-order: '{order}' is not one of {', '.join(REPEAT_ORDERS)}")
    rounds = leg_order(legs, repeats)
    if order == "model":
        return [(m, repeat, round_legs) for m in models for repeat, round_legs in rounds]
    return [(m, repeat, round_legs) for repeat, round_legs in rounds for m in models]


def selected_models(opts: SweepOptions) -> list:
    """The table's models that this sweep runs, in the table's order; an id not in the table is an error."""
    table = opts.scenarios.table
    if not opts.models:
        return list(table.models)
    ids = [m.id for m in table.models]
    unknown = [m for m in opts.models if m not in ids]
    if unknown:
        raise AblationError(f"--model: {', '.join(unknown)} not in {opts.scenarios.path} (its models: {', '.join(ids)})")
    if len(set(opts.models)) != len(opts.models):
        raise AblationError(f"--model: an id given twice ({', '.join(opts.models)})")
    return [m for m in table.models if m.id in opts.models]


class Planner:
    """Validates a sweep's options against this machine (or each architecture's nodes) and lays out its tasks."""

    def __init__(self, stacks: StackDir, builder: VenvBuilder, models_root: Path, machine: Machine):
        self.stacks = stacks
        self.builder = builder
        self.models_root = models_root
        self.machine = machine

    @staticmethod
    def check_platform(sf: StackFile, machine: Machine, arch: str | None) -> None:
        if sf.stack.platform == "cuda" and machine.platform != "cuda":
            if arch:
                raise AblationError(f"{sf.path}: field 'platform': leg {sf.leg} needs CUDA GPUs and the nodes of "
                                    f"architecture {arch} have none; pass --arch with GPU architectures only")
            raise AblationError(
                f"{sf.path}: field 'platform': leg {sf.leg} needs CUDA GPUs and this machine has none; "
                "run it on a GPU machine or pick a -cpu leg"
            )

    @staticmethod
    def skip_reasons(table, arch: str | None, machines: list[Machine]) -> dict[str, str | None]:
        """model id -> why the architecture's machines cannot run it (None: they can). Nodes that
        advertise one architecture must agree, or a task's SKIP/PASS would depend on placement."""
        skip = {}
        for m in table.models:
            reasons = {machine.unmet(m.requires, m.tp) for machine in machines}
            if len(reasons) > 1:
                raise AblationError(f"--arch {arch}: its nodes differ on model {m.id} ("
                                    + "; ".join(sorted(r or "can run it" for r in reasons))
                                    + "); start unlike nodes with different `ablation node-resources --arch` names")
            skip[m.id] = reasons.pop()
        return skip

    def validate(self, opts: SweepOptions, machines: dict[str | None, list[Machine]] | None = None) -> Resolved:
        """Everything bad input can break, checked before the host lock is awaited or a venv is built.
        `machines`: each architecture's nodes (Ray `--arch`); by default this machine alone."""
        machines = machines or {None: [self.machine]}
        empty = [a for a, ms in machines.items() if not ms]
        if empty:
            raise AblationError(f"--arch: {', '.join(empty)}: no live node of it answered; check `ray status`")
        if not opts.legs:
            raise AblationError("no legs given; pass --leg (known legs: " + ", ".join(self.stacks.legs()) + ")")
        stack_files: dict[str, StackFile] = {}
        for given in opts.legs:  # keyed by the leg's own name: a path given as --leg runs as that leg
            sf = self.stacks.load(given)
            if sf.leg in stack_files:
                raise AblationError(f"--leg: leg '{sf.leg}' given twice ({stack_files[sf.leg].path}, {sf.path})")
            stack_files[sf.leg] = sf
        table = opts.scenarios.table
        for sf in stack_files.values():
            for arch, ms in machines.items():
                self.check_platform(sf, ms[0], arch)
            for m in table.models:
                clash = sorted(k for k, v in m.engine_env.items() if sf.stack.env.get(k, v) != v)
                if clash:
                    raise AblationError(f"{opts.scenarios.path}: field 'engine_env' of {m.id}: {', '.join(clash)} "
                                        f"also set differently by {sf.path} ('env'); set it in one place")
        skip = {arch: self.skip_reasons(table, arch, ms) for arch, ms in machines.items()}
        runnable = [m for m in selected_models(opts) if any(not s[m.id] for s in skip.values())]
        prepared = {m.id: prepare_model(m, opts.scenarios, self.models_root) for m in runnable}
        return Resolved(stack_files, {a: ms[0] for a, ms in machines.items()}, skip, prepared)

    def plan(self, opts: SweepOptions, resolved: Resolved | None = None) -> dict[str | None, list[Task]]:
        """Each architecture's tasks in run order (key None: the local run); builds (or reuses)
        the venvs they need, once for all architectures."""
        resolved = resolved or self.validate(opts)
        envs = {}
        plans: dict[str | None, list[Task]] = {arch: [] for arch in resolved.skip}
        # Model by model, the round's legs side by side: a leg pair's tasks run next to each other
        # (drift between them is one task's, not a whole leg's), and a run stopped early
        # (`--stop-after`, a lost machine) leaves every model it reached measured on every leg.
        for m, repeat, legs in task_order(selected_models(opts), list(resolved.stack_files), opts.repeats,
                                          opts.repeat_order):
            for leg in legs:
                sf = resolved.stack_files[leg]
                for arch, skip in resolved.skip.items():
                    if skip[m.id]:
                        plans[arch].append(Task(leg, m, repeat, None, None, skip_reason=skip[m.id]))
                        continue
                    override = sf.stack.override_for(m.id)
                    variant = override.name if override else None
                    if (leg, variant) not in envs:
                        envs[(leg, variant)] = self.builder.ensure(sf, variant)
                    plans[arch].append(Task(leg, m, repeat, envs[(leg, variant)], resolved.prepared[m.id],
                                            stack_env=sf.stack.env, stack_file=sf,
                                            patches_dir=self.builder.patches_dir))
        return plans
