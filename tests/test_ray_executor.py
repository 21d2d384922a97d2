"""The Ray executor on a real local multi-node Ray cluster started by the test.

Nodes get fake GPUs (`num_gpus`) and the `ablation_node` resource; the engine is
the FAULT-INJECTION harness so the test controls task length. One node is
killed mid-task: that attempt must be FAIL(node-lost) and the task retried once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from helpers import FAULT_HARNESS, REPO, fault_env, fault_project, one_line_error, project_argv

from ablation.util.jsonio import read_jsonl

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.ray


@pytest.fixture
def project(tmp_path):
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, tp: 2, workloads: [mixed]}}" for i in range(4)]
    return fault_project(tmp_path, {"la": "1.16.0"}, models)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    # the nodes build their own leg venvs: keep them in this test's directory, not ~/.cache
    monkeypatch.setenv("ABLATION_VENV_ROOT", str(tmp_path / "node-venvs"))
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"ablation_node": 0}})
    nodes = [c.add_node(num_cpus=1, num_gpus=2, resources={"ablation_node": 1}) for _ in range(2)]
    c.wait_for_nodes()
    yield c, nodes
    c.shutdown()


def argv(project: Path, address: str, *extra: str) -> list[str]:
    return project_argv(project, "run", "--leg", "la", "--scenarios", str(project / "table.yaml"),
                        "--results", str(project / "results"), "--run-id", "r", "--harness", str(FAULT_HARNESS),
                        "--executor", "ray", "--address", address, *extra)


def env(project: Path, slow: float, hang: str = "") -> dict:
    return fault_env(project, slow_s=slow, hang_modes=hang)


def test_tasks_spread_over_nodes_one_at_a_time_and_a_lost_node_is_retried_once(project, cluster):
    c, nodes = cluster
    # Each task runs about 4 s (the fault harness's default: the FAULT_* knobs of the driver's
    # environment do not reach the workers of this in-process cluster); the node running slow-0
    # is the one we kill, while it runs.
    proc = subprocess.Popen(argv(project, c.address, "--timeout", "30"), cwd=REPO, env=env(project, 4),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    events = project / "results/r/run.jsonl"
    deadline = time.monotonic() + 180
    victim = None
    while time.monotonic() < deadline and victim is None:
        # the hanging task's harness runs under one node's raylet: that node is the victim
        for n in nodes:
            raylet = psutil.Process(n.all_processes["raylet"][0].process.pid)
            if any("fault__slow-0" in " ".join(ch.cmdline()) for ch in raylet.children(recursive=True) if _safe(ch)):
                victim = n
        time.sleep(0.5)
    assert victim is not None, "the hanging task never started"
    c.remove_node(victim)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    ev = read_jsonl(events)
    ends = [e for e in ev if e["event"] == "task_end"]
    lost = [e for e in ends if e["status"] == "FAIL" and (e.get("cause") or {}).get("class") == "node-lost"]
    assert len(lost) == 1 and lost[0]["task_id"] == "la/fault__slow-0/r1"
    retry = [e for e in ev if e["event"] == "task_retry"]
    assert len(retry) == 1 and retry[0]["attempt"] == 2
    d = project / "results/r/la/fault__slow-0"
    assert json.loads((d / "results.json").read_text())["cause"]["class"] == "node-lost"
    second = json.loads((d / "results.r1a2.json").read_text())
    assert second["status"] == "PASS", second  # retried once, on the surviving node, where it ran to the end
    passed = {e["task_id"] for e in ends if e["status"] == "PASS"}
    assert {"la/fault__slow-1/r1", "la/fault__slow-2/r1", "la/fault__slow-3/r1"} <= passed
    # every finished task's files came back to the head's run directory, with the node that ran it
    for i in (1, 2, 3):
        assert (project / f"results/r/la/fault__slow-{i}/results.json").is_file()
    # the other three ran on the surviving node while slow-0 hung on the victim: two nodes in parallel,
    # and on one node never two tasks at once
    survivor = next(n for n in nodes if n is not victim)
    starts = {(e["task_id"], e["attempt"]): e for e in ev if e["event"] == "task_start" and "node" in e}
    on_survivor = sorted((e["ts"], next(x["ts"] for x in ends if (x["task_id"], x["attempt"]) == key))
                         for key, e in starts.items() if e["node"] == survivor.node_id)
    assert len(on_survivor) >= 3
    # the lost node's only task start reached the head while it ran (streamed), nothing else from it
    assert {k for k, e in starts.items() if e["node"] != survivor.node_id} == {("la/fault__slow-0/r1", 1)}
    assert all(end <= nxt_start for (_, end), (nxt_start, _) in zip(on_survivor, on_survivor[1:]))


def test_the_event_relay_lives_on_the_driver_s_node_not_on_a_node_that_may_be_lost(cluster):
    # A relay placed on a worker node dies with it, and the driver's next drain raises
    # ActorDiedError: the run stops instead of recording one node-lost attempt (seen in CI).
    from ablation.execution.ray_cluster import start_relay

    c, nodes = cluster
    ray.init(address=c.address, namespace="vllm-ablation-test", log_to_driver=False)
    try:
        driver = ray.get_runtime_context().get_node_id()
        workers = {n.node_id for n in nodes}
        assert driver not in workers
        placed = [ray.get(start_relay().node.remote(), timeout=60) for _ in range(8)]
        assert set(placed) == {driver}, placed
    finally:
        ray.shutdown()


def _safe(p) -> bool:
    try:
        p.cmdline()
        return True
    except Exception:
        return False


def test_cluster_without_ablation_nodes_is_refused(project):
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        proc = subprocess.run(argv(project, c.address), cwd=REPO, env=env(project, 0), capture_output=True,
                              text=True, timeout=300)
        assert "no node with the 'ablation_node' resource" in one_line_error(proc)
    finally:
        c.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_ray_start_nodes_build_their_own_legs_with_identical_locks(tmp_path):
    """`ray start` head + two `ray start` workers on loopback, each worker with its own empty venv
    root as if it were another machine: each builds the leg itself before running its tasks."""
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, workloads: [mixed]}}" for i in range(4)]
    project = fault_project(tmp_path, {"la": "1.16.0"}, models)
    ray_bin = str(Path(sys.executable).parent / "ray")
    roots = [tmp_path / f"node{i}-venvs" for i in range(2)]
    with real_ray_cluster(tmp_path, roots, ray_bin) as address:
        run = subprocess.Popen(project_argv(project, "run", "--leg", "la", "--scenarios", str(project / "table.yaml"),
                                            "--results", str(project / "results"), "--run-id", "r", "--harness",
                                            str(FAULT_HARNESS), "--executor", "ray", "--address", address),
                               cwd=REPO, env=env(project, 4), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        # events stream while tasks run: a node's task_start reaches the head's run.jsonl before its task_end
        events, seen_running, lag = project / "results/r/run.jsonl", None, None
        deadline = time.monotonic() + 300
        while seen_running is None and time.monotonic() < deadline and run.poll() is None:
            ev = read_jsonl(events) if events.is_file() else []
            ended = {(e["task_id"], e.get("attempt")) for e in ev if e["event"] == "task_end"}
            running = [e for e in ev if e["event"] == "task_start" and "node" in e
                       and (e["task_id"], e.get("attempt")) not in ended]
            if running:
                seen_running, lag = running[0], time.time() - running[0]["ts"]
            time.sleep(0.2)
        out, err = run.communicate(timeout=600)
        proc = subprocess.CompletedProcess(run.args, run.returncode, out, err)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ev = read_jsonl(project / "results/r/run.jsonl")
    assert sorted(e["task_id"] for e in ev if e["event"] == "task_end" and e["status"] == "PASS") == \
        [f"la/fault__slow-{i}/r1" for i in range(4)]
    built = [e for e in ev if e["event"] == "leg_built"]
    nodes = {e["node"] for e in ev if e["event"] == "task_start"}
    assert {e["node"] for e in built} == nodes and len(nodes) == 2  # every node that ran a task built the leg
    head_lock = json.loads((project / "venvs/la/manifest.json").read_text())["lock_sha256"]
    assert {e["lock_sha256"] for e in built} == {head_lock} and not [e for e in ev if e["event"] == "lock_differs"]
    for root in roots:  # each "machine" holds its own venv, built from the same stack file
        assert json.loads((root / "la/manifest.json").read_text())["lock_sha256"] == head_lock
    rec = json.loads((project / "results/r/la/fault__slow-0/results.json").read_text())
    assert rec["stack"]["venv"].startswith(str(tmp_path / "node"))  # the record names the venv that ran it
    assert seen_running is not None, "no task_start reached the head while its task ran"
    print(f"event lag (task_start on a node -> seen in the head's run.jsonl): {lag:.2f} s")
    assert lag < 4  # within the 4 s task: streamed, not delivered at task end
    keys = [(e["event"], e["ts"], e.get("task_id"), e.get("attempt")) for e in ev]
    assert len(keys) == len(set(keys))  # streamed and returned copies never both written


def test_a_leg_that_does_not_build_on_a_node_is_that_task_s_dependency_failure(tmp_path, monkeypatch):
    from ablation.envs.builder import LegEnv
    from ablation.execution.local import Task
    from ablation.execution.ray_cluster import _leg_on_node
    from ablation.spec.scenarios import load_scenarios
    from ablation.spec.stacks import load_stack_file

    project = fault_project(tmp_path, {"la": "1.16.0"}, ["{id: fault/ok, source: {path: model}, workloads: [mixed]}"])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("ABLATION_VENV_ROOT", str(blocker / "venvs"))  # this node cannot create its venv root
    sf = load_stack_file(project / "stacks/la.yaml")
    spec = load_scenarios(project / "table.yaml").table.models[0]
    missing = LegEnv("la", None, tmp_path / "head-venvs/la", tmp_path / "head-venvs/la/bin/python",
                     {"lock_sha256": "x"})
    task = Task("la", spec, 1, missing, None, stack_file=sf, patches_dir=project / "patches")
    _, events, failed = _leg_on_node(task, "node-without-space")
    assert failed is not None and failed.status == "FAIL" and failed.cause.cls == "dependency"
    assert failed.cause.signature.startswith("leg build on node node-wit failed:")
    assert events[0]["event"] == "leg_build_failed"


@contextmanager
def real_ray_cluster(tmp_path: Path, roots: list[Path], ray_bin: str, archs: list[str] | None = None,
                     cpus: list[set[int] | None] | None = None):
    """`ray start --head` and one `ray start` worker per venv root, on loopback; stopped after.
    `archs`: what each worker advertises (`ablation node-resources --arch`), as if they differed;
    `cpus`: the CPUs each worker's processes may run on (its affinity, as `taskset` sets it)."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    base = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    loopback = "--node-ip-address=127.0.0.1"
    try:
        subprocess.run([ray_bin, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                        loopback, "--resources", '{"ablation_node": 0}', f"--temp-dir={ray_tmp}"],
                       env=base, check=True, capture_output=True, timeout=120)
        for i, root in enumerate(roots):
            resources = {"ablation_node": 1, **({f"ablation_arch:{archs[i]}": 1} if archs else {})}
            pin = cpus[i] if cpus else None
            subprocess.run([ray_bin, "start", f"--address={address}", "--num-cpus=1", loopback,
                            "--resources", json.dumps(resources)],
                           env={**base, "ABLATION_VENV_ROOT": str(root)}, check=True, capture_output=True,
                           timeout=120, preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None)  # noqa: B023 (called at once)
        yield address
    finally:
        subprocess.run([ray_bin, "stop", "--force"], env=base, capture_output=True, timeout=120)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _task_processes(project: Path) -> list[int]:
    """Live processes of this project's tasks (harnesses and their engine children), wherever Ray
    started them: they carry the task environment (this project's lock file, the runner's pid)."""
    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            e = p.environ()
        except (psutil.Error, OSError):
            continue
        if (e.get("ABLATION_LOCK_FILE") == str(project / "host.lock") and "ABLATION_RUNNER_PID" in e
                and p.info["status"] != psutil.STATUS_ZOMBIE):
            out.append(p.info["pid"])
    return out


def test_real_ray_start_driver_killed_mid_sweep_resumes_losing_and_duplicating_nothing(tmp_path):
    """The head's driver is SIGKILLed while both nodes run a task: their harnesses die with their
    Ray workers, and `--resume` on the head redoes exactly the unfinished tasks."""
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, workloads: [mixed]}}" for i in range(4)]
    project = fault_project(tmp_path, {"la": "1.16.0"}, models)
    ray_bin = str(Path(sys.executable).parent / "ray")
    run_argv = project_argv(project, "run", "--leg", "la", "--scenarios", str(project / "table.yaml"),
                            "--results", str(project / "results"), "--harness", str(FAULT_HARNESS),
                            "--executor", "ray")
    events = project / "results/r/run.jsonl"
    with real_ray_cluster(tmp_path, [tmp_path / f"node{i}-venvs" for i in range(2)], ray_bin) as address:
        # slow-2 and slow-3 hang in this first run, each with an engine child (as vLLM has)
        driver = subprocess.Popen(run_argv + ["--address", address, "--run-id", "r"], cwd=REPO,
                                  env=env(project, 6, hang="slow-2,slow-3"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline, killed_while = time.monotonic() + 300, None
        while killed_while is None and time.monotonic() < deadline and driver.poll() is None:
            ev = read_jsonl(events) if events.is_file() else []
            ended = {e["task_id"] for e in ev if e["event"] == "task_end"}
            done = [t for t in ended if (project / "results/r" / t.split("/")[0] / t.split("/")[1]
                                         / "results.json").is_file()]
            running = {e["task_id"] for e in ev if e["event"] == "task_pid" and "node" in e} - ended
            if done and running & {"la/fault__slow-2/r1", "la/fault__slow-3/r1"}:  # a hanging one runs
                os.kill(driver.pid, signal.SIGKILL)  # the head's driver, mid-sweep
                killed_while = (sorted(done), sorted(running))
            time.sleep(0.2)
        driver.wait(timeout=60)
        assert killed_while is not None, "never saw a finished and a running task at once: " + driver.stderr.read()
        done_before, running_before = killed_while
        # the running tasks (harness + engine child) end with their Ray workers (die_with_parent)
        gone_by = time.monotonic() + 30
        while _task_processes(project) and time.monotonic() < gone_by:
            time.sleep(0.5)
        assert not _task_processes(project), "a task outlived the killed driver's Ray worker"
        before = events.read_bytes()
        resumed = subprocess.run(run_argv + ["--address", address, "--resume", "r"], cwd=REPO, env=env(project, 1),
                                 capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert events.read_bytes().startswith(before), "run.jsonl was rewritten, not appended"
    ev = read_jsonl(events)
    resume = next(e for e in ev if e["event"] == "run_resume")
    assert resume["already_done"] == len(done_before) and set(running_before) <= set(resume["todo"])
    for i in range(4):  # 0 lost, 0 duplicated: one PASS result per task, on disk on the head
        d = project / f"results/r/la/fault__slow-{i}"
        passes = [p for p in d.glob("results*.json") if json.loads(p.read_text())["status"] == "PASS"]
        assert len(passes) == 1, (i, sorted(p.name for p in d.iterdir()))
        if f"la/fault__slow-{i}/r1" in done_before:  # finished before the kill: not run again
            assert [p.name for p in passes] == ["results.json"] and not (d / "results.r1a2.json").exists()
    print(f"driver killed with {done_before} done and {running_before} running; resumed: "
          f"{resume['already_done']} kept, {len(resume['todo'])} redone")


def test_real_ray_start_one_command_runs_the_table_on_every_architecture(tmp_path):
    """Two workers that advertise two (fake) architectures: `--arch all` runs the whole table on
    each, into one run directory per architecture, and compare-arch reads those directly. The
    "b200" worker may use one CPU only: a scenario that needs two is SKIP on that architecture
    (judged on its own node, not on the two-CPU head) and runs on the other."""
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        pytest.skip("needs a machine with 2 CPUs to give the two workers different CPU counts")
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, workloads: [mixed]}}" for i in range(2)]
    models.append("{id: fault/slow-2cpu, source: {path: model}, workloads: [mixed], "
                  "requires: {min_cpus: 2, reason: tp 2 on CPU}}")
    project = fault_project(tmp_path, {"la": "1.16.0"}, models)
    ray_bin = str(Path(sys.executable).parent / "ray")
    roots = [tmp_path / "h200-node-venvs", tmp_path / "b200-node-venvs"]
    resources = subprocess.run(project_argv(project, "node-resources", "--arch", "fake-h200"), cwd=REPO,
                               capture_output=True, text=True, check=True).stdout
    assert json.loads(resources) == {"ablation_node": 1, "ablation_arch:fake-h200": 1}
    run_argv = project_argv(project, "run", "--leg", "la", "--scenarios", str(project / "table.yaml"),
                            "--results", str(project / "results"), "--harness", str(FAULT_HARNESS),
                            "--executor", "ray", "--run-id", "r")
    with real_ray_cluster(tmp_path, roots, ray_bin, archs=["fake-h200", "fake-b200"],
                          cpus=[None, {usable[0]}]) as address:
        proc = subprocess.run(run_argv + ["--address", address, "--arch", "all"], cwd=REPO, env=env(project, 1),
                              capture_output=True, text=True, timeout=300)
        unknown = subprocess.run(run_argv + ["--address", address, "--arch", "fake-mi300"], cwd=REPO,
                                 env=env(project, 1), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = one_line_error(unknown)
    assert "--arch: fake-mi300: no node advertises it" in line and "fake-b200, fake-h200" in line
    for arch, root in (("fake-h200", roots[0]), ("fake-b200", roots[1])):
        run_dir = project / f"results/r@{arch}"
        ends = {e["task_id"]: e for e in read_jsonl(run_dir / "run.jsonl") if e["event"] == "task_end"}
        passed = sorted(t for t, e in ends.items() if e["status"] == "PASS")
        two_cpu = "la/fault__slow-2cpu/r1"
        assert passed == ["la/fault__slow-0/r1", "la/fault__slow-1/r1"] + ([two_cpu] if arch == "fake-h200" else [])
        for i in range(2):  # every task of this directory ran on the node of this architecture
            rec = json.loads((run_dir / f"la/fault__slow-{i}/results.json").read_text())
            assert rec["run_id"] == f"r@{arch}" and rec["stack"]["venv"].startswith(str(root))
        manifest = json.loads((run_dir / "MANIFEST.json").read_text())  # the architecture's node, not the head
        assert manifest["machine"]["cpu_count"] == (len(usable) if arch == "fake-h200" else 1)
    skipped = json.loads((project / "results/r@fake-b200/la/fault__slow-2cpu/results.json").read_text())
    assert skipped["status"] == "SKIP"
    assert skipped["skip_reason"] == "needs 2 CPUs, this machine has 1 (tp 2 on CPU)"
    arch = subprocess.run(project_argv(project, "compare-arch", str(project / "results/r@fake-h200"),
                                       str(project / "results/r@fake-b200"), "--names", "H200,B200"),
                          cwd=REPO, capture_output=True, text=True)
    assert arch.returncode == 0, arch.stderr
    # the 2-CPU model ran on the 2-CPU architecture only: attributed as n/a on the other, not as a failure
    assert "| fault/slow-2cpu | la | PASS | SKIP (needs 2 CPUs, this machine has 1 (tp 2 on CPU)) | n/a on B200 |" \
        in arch.stdout, arch.stdout


def test_real_ray_start_worker_killed_mid_task_is_node_lost_and_retried_once(tmp_path):
    """Kill the raylet of the `ray start` worker running a task: that attempt is FAIL(node-lost),
    the task is retried once on the other worker, and the other tasks are not disturbed."""
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, workloads: [mixed]}}" for i in range(3)]
    project = fault_project(tmp_path, {"la": "1.16.0"}, models)
    ray_bin = str(Path(sys.executable).parent / "ray")
    roots = [tmp_path / f"node{i}-venvs" for i in range(2)]
    run_argv = project_argv(project, "run", "--leg", "la", "--scenarios", str(project / "table.yaml"),
                            "--results", str(project / "results"), "--harness", str(FAULT_HARNESS),
                            "--executor", "ray", "--run-id", "r", "--timeout", "20")
    with real_ray_cluster(tmp_path, roots, ray_bin) as address:
        # each task runs about 3 s: kill the raylet under slow-0 while it runs
        driver = subprocess.Popen(run_argv + ["--address", address], cwd=REPO, env=env(project, 3),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        raylet, deadline = None, time.monotonic() + 180
        while raylet is None and time.monotonic() < deadline:
            for p in psutil.process_iter(["cmdline"]):
                cmd = " ".join(p.info["cmdline"] or [])
                if FAULT_HARNESS.name in cmd and "fault__slow-0" in cmd:
                    raylet = next((a for a in p.parents() if "raylet" in a.name()), None)
            time.sleep(0.3)
        assert raylet is not None, "the hanging task never started under a raylet"
        raylet.kill()  # that machine is gone
        _, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err[-3000:]
    ev = read_jsonl(project / "results/r/run.jsonl")
    ends = [e for e in ev if e["event"] == "task_end"]
    lost = [e for e in ends if (e.get("cause") or {}).get("class") == "node-lost"]
    assert [(e["task_id"], e["attempt"]) for e in lost] == [("la/fault__slow-0/r1", 1)]
    assert [(e["task_id"], e["attempt"]) for e in ev if e["event"] == "task_retry"] == [("la/fault__slow-0/r1", 2)]
    d = project / "results/r/la/fault__slow-0"
    second = json.loads((d / "results.r1a2.json").read_text())  # recorded beside attempt 1, not over it
    assert second["status"] == "PASS", second  # a 3 s task, retried on the other worker, within --timeout 20
    assert json.loads((d / "results.json").read_text())["cause"]["class"] == "node-lost"
    assert {"la/fault__slow-1/r1", "la/fault__slow-2/r1"} <= {e["task_id"] for e in ends if e["status"] == "PASS"}
