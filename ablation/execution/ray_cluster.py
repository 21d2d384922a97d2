"""Run a sweep's tasks on an existing Ray cluster, keeping serial-exclusive per node.

Each node that may run tasks advertises the custom resource `ablation_node: 1`
(`ray start --resources '{"ablation_node": 1}'`); every task asks for one unit
of it, plus `tp` GPUs when the cluster has GPUs. So a node runs one task at a
time, holding all the GPUs that task needs, and several nodes work in
parallel. On the node the task runs exactly as it does locally (`run_task`:
own process group, timeout, checks) in a scratch directory; its files and
events are sent back to the head, which writes them into the run directory
and appends the events to run.jsonl. The head numbers attempts, so nothing is
overwritten. A node lost mid-task makes that attempt FAIL(node-lost) and the
task is retried once on whatever node is free. Events stream to the head while a
task runs (EventRelay); the list a task returns fills in what the stream missed.

A node that lacks a leg's venv builds it before running that leg's task (the
same stack file and patches, hence the same fingerprint; under the node's own
$ABLATION_VENV_ROOT, one build at a time per venv). A build that fails is that
task's FAIL(dependency) with the build log sent back (`build.<node>.log`);
other nodes go on. Every node build is a `leg_built` event on the head with
the node and the lock's sha256; a lock that differs from the head's is a
`lock_differs` event and a warning. Nodes need the `ablation` package
importable by their Ray workers and the patches directory at the same path.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ablation.errors import AblationError
from ablation.execution.local import RunContext, Task, TaskOutcome, base_record, describe, run_task
from ablation.results import layout
from ablation.results.record import Cause
from ablation.util.jsonio import append_jsonl, read_jsonl, write_bytes_atomic

NODE_RESOURCE = "ablation_node"
ARCH_RESOURCE = "ablation_arch:"  # + Machine.arch: what a node is (`ablation node-resources` prints both)
MAX_NODE_LOST_RETRIES = 1


@dataclass
class RemoteResult:
    node: str
    status: str
    cause: Cause | None
    duration_s: float
    files: dict[str, bytes]  # names inside the task dir -> content
    events: list[dict]
    phases: dict[str, float] | None = None


def _leg_on_node(task: Task, node: str) -> tuple[Task, list[dict], RemoteResult | None]:
    """The task with this node's own venv of the leg (under the node's $ABLATION_VENV_ROOT),
    built here first if the node lacks it or it does not match the stack. Returns (task, events,
    failure): failure is the FAIL(dependency) result of a build that failed."""
    if task.env is None or task.stack_file is None:
        return task, [], None
    from ablation.envs.builder import VenvBuilder, default_venv_root

    builder = VenvBuilder(default_venv_root(), task.patches_dir, log=lambda m: None)
    started = time.time()
    try:
        env = builder.existing(task.stack_file, task.env.variant)
        if env is not None:
            return replace(task, env=env), [], None
        env = builder.ensure(task.stack_file, task.env.variant)
    except (AblationError, OSError) as exc:  # OSError: no room or no permission for the venv here
        log = builder.venv_root / f"{task.env.path.name}.build.log"
        cause = Cause.of("dependency", f"leg build on node {node[:8]} failed: {exc}"[:400])
        files = {f"build.{node[:8]}.log": log.read_bytes()} if log.is_file() else {}
        ev = {"event": "leg_build_failed", "ts": time.time(), "task_id": task.task_id, "node": node,
              "leg": task.leg, "error": str(exc)[:400]}
        return task, [ev], RemoteResult(node, "FAIL", cause, time.time() - started, files, [ev])
    events = [{"event": "leg_built", "ts": time.time(), "task_id": task.task_id, "node": node, "leg": task.leg,
               "venv": str(env.path), "lock_sha256": env.lock_sha256, "seconds": round(time.time() - started, 1)}]
    if env.lock_sha256 != task.env.lock_sha256:
        events.append({"event": "lock_differs", "ts": time.time(), "task_id": task.task_id, "node": node,
                       "leg": task.leg, "head_lock_sha256": task.env.lock_sha256, "node_lock_sha256": env.lock_sha256})
    return replace(task, env=env), events, None


class EventRelay:
    """A Ray actor on the head's side: nodes push events as they happen, the head drains them
    into run.jsonl while the tasks run (not only at task end)."""

    def __init__(self):
        self.queue: list[dict] = []

    def push(self, event: dict) -> None:
        self.queue.append(event)

    def drain(self) -> list[dict]:
        out, self.queue = self.queue, []
        return out

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()


def start_relay():
    """The EventRelay, pinned to the driver's own node: a relay placed on a worker node would die
    with that node and take the whole run down with it (a lost node must cost one attempt only)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0)(EventRelay).options(scheduling_strategy=here).remote()


def _event_key(e: dict) -> tuple:
    """Identity of one event, the same in the streamed copy and in the task's returned list."""
    return (e.get("run_id"), e.get("event"), e.get("ts"), e.get("task_id"), e.get("attempt"))


def _execute_on_node(task: Task, ctx: RunContext, attempt: int, relay=None) -> RemoteResult:
    """Body of the Ray task: run in a node-local scratch run dir, return what it wrote."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    push = (lambda e: relay.push.remote({"run_id": ctx.run_id, **e, "node": node})) if relay is not None else None
    task, build_events, failed = _leg_on_node(task, node)
    if push:
        for e in build_events:
            push(e)
    if failed is not None:
        return failed
    from ablation.execution.machine import probe

    with tempfile.TemporaryDirectory(prefix="ablation-ray-") as tmp:
        # The record names the machine that ran the task (its GPUs, CPU, hostname), not the head's:
        # results are grouped by machine, and a B200 node's numbers must not read as the head's.
        scratch = RunContext(ctx.run_id, Path(tmp) / ctx.run_id, ctx.scenarios, probe(), harness=ctx.harness,
                             timeout_override_s=ctx.timeout_override_s, extra_env=ctx.extra_env,
                             log=lambda m: None, gpu_check=f"ray node {node}", event_sink=push)
        outcome = run_task(task, scratch, attempt=attempt)
        task_dir = outcome.results_path.parent
        files = {p.name: p.read_bytes() for p in task_dir.iterdir() if p.is_file()}
        events = build_events + read_jsonl(scratch.events)
    for e in events:
        e["node"] = node
        e.setdefault("run_id", ctx.run_id)  # build events are made outside the run's context
    return RemoteResult(node, outcome.status, outcome.cause, outcome.duration_s, files, events, outcome.phases)


def _connect(address: str) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False, namespace="vllm-ablation")
    if ray.cluster_resources().get(NODE_RESOURCE, 0) < 1:
        raise AblationError(f"Ray cluster at {address} has no node with the '{NODE_RESOURCE}' resource; start "
                            f"workers with --resources \"$(ablation node-resources)\"")


def cluster_archs(address: str) -> list[str]:
    """The architectures the cluster's nodes advertise (`ablation_arch:<arch>` resources)."""
    import ray

    _connect(address)
    return sorted(k.removeprefix(ARCH_RESOURCE) for k in ray.cluster_resources() if k.startswith(ARCH_RESOURCE))


def arch_machines(address: str, archs: list[str]) -> dict[str, list]:
    """Each architecture's nodes, as each describes itself (`probe()` run on that node): the head
    judges a scenario's `requires` against these, since the head itself may be another machine."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ablation.execution.machine import probe

    _connect(address)
    remote_probe = ray.remote(num_cpus=0, max_retries=0)(probe)
    refs: dict[str, list] = {a: [] for a in archs}
    for node in ray.nodes():
        have = node.get("Resources", {})
        if not node.get("Alive") or have.get(NODE_RESOURCE, 0) < 1:
            continue
        for a in archs:
            if have.get(ARCH_RESOURCE + a, 0) > 0:
                where = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
                refs[a].append(remote_probe.options(scheduling_strategy=where).remote())
    return {a: ray.get(r, timeout=120) for a, r in refs.items()}


@dataclass
class RayJob:
    """One task of one run: `arch` pins it to nodes of that architecture (None: any node)."""
    task: Task
    ctx: RunContext
    arch: str | None = None


def run_on_ray(jobs: list[RayJob], address: str, progress) -> list[TaskOutcome]:
    """Run every job on the cluster at once (each node serial), writing each into its own run."""
    import ray
    from ray.exceptions import RayError, RayTaskError

    _connect(address)
    gpus = ray.cluster_resources().get("GPU", 0)
    remote = ray.remote(max_retries=0)(_execute_on_node)
    relay = start_relay()
    streamed: set[tuple] = set()
    runs = {job.ctx.run_id: job.ctx for job in jobs}

    def drain_events() -> None:
        for e in ray.get(relay.drain.remote()):
            streamed.add(_event_key(e))
            append_jsonl(runs[e["run_id"]].events, e)  # each event into the run it belongs to

    def submit(job: RayJob):
        task, ctx = job.task, job.ctx
        files = layout.next_task_files(ctx.run_dir, task.leg, task.model.slug, task.repeat)
        files.directory.mkdir(parents=True, exist_ok=True)
        # Claim the attempt number at once (an empty log), so a retry gets the next one.
        files.log.touch()
        resources = {NODE_RESOURCE: 1, **({ARCH_RESOURCE + job.arch: 0.001} if job.arch else {})}
        opts = {"resources": resources, "num_gpus": task.model.tp if gpus else 0, "num_cpus": 0}
        ctx.event("task_dispatch", task_id=task.task_id, attempt=files.attempt, executor="ray", arch=job.arch)
        return remote.options(**opts).remote(task, ctx, files.attempt, relay), files

    pending = {}
    retries: dict[tuple[str, str], int] = {}
    for job in jobs:
        ref, files = submit(job)
        pending[ref] = (job, files, time.time())
    outcomes: list[TaskOutcome] = []
    done_count = 0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        drain_events()  # what the running tasks did since the last look
        if not ready:
            continue
        ref = ready[0]
        job, files, submitted = pending.pop(ref)
        task, ctx = job.task, job.ctx
        where = ""
        try:
            result: RemoteResult = ray.get(ref)
        except RayTaskError as exc:  # the task body itself raised: a runner bug, not a lost node
            outcome = _record_failure(ctx, task, files, submitted, "harness-error", str(exc).splitlines()[-1])
        except RayError as exc:
            outcome = _record_failure(ctx, task, files, submitted, "node-lost",
                                      f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            key = (ctx.run_id, task.task_id)
            if retries.get(key, 0) < MAX_NODE_LOST_RETRIES:
                retries[key] = retries.get(key, 0) + 1
                ref2, files2 = submit(job)
                pending[ref2] = (job, files2, time.time())
                ctx.event("task_retry", task_id=task.task_id, attempt=files2.attempt, reason="node-lost")
        else:
            for name, content in result.files.items():
                write_bytes_atomic(files.directory / name, content)
            drain_events()
            for e in result.events:
                if _event_key(e) not in streamed:  # whatever the stream did not bring (it is best effort)
                    append_jsonl(ctx.events, e)
                if e["event"] == "lock_differs":
                    ctx.log(f"warning: {e['leg']}: the lock built on node {e['node'][:8]} differs from this "
                            f"machine's ({e['node_lock_sha256'][:12]} vs {e['head_lock_sha256'][:12]})")
            if result.status == "FAIL" and files.results.name not in result.files:  # the leg did not build there
                _record_failure(ctx, task, files, submitted, result.cause.cls, result.cause.signature)
            outcome = TaskOutcome(task.task_id, result.status, result.cause, files.results, result.duration_s,
                                  result.phases)
            where = f" on node {result.node[:8]}" + (f" ({job.arch})" if job.arch else "")
        done_count += 1
        progress.task_finished(done_count, describe(outcome) + where)
        outcomes.append(outcome)
    return outcomes


def _record_failure(ctx: RunContext, task: Task, files: layout.TaskFiles, submitted: float, cls: str,
                    signature: str) -> TaskOutcome:
    record = base_record(task, ctx, files)
    cause = Cause.of(cls, signature)
    now = time.time()
    record = record.updated(status="FAIL", cause=cause, started_at=submitted, finished_at=now,
                            duration_s=round(now - submitted, 2), executor="ray")
    record.write(files.results)
    ctx.event("task_end", task_id=task.task_id, attempt=files.attempt, status="FAIL",
              cause=cause.model_dump(by_alias=True))
    return TaskOutcome(task.task_id, "FAIL", cause, files.results, now - submitted)
