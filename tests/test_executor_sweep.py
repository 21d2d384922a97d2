"""Whole sweeps through the real CLI: host lock, SIGKILL + resume, repeats order.

The legs are real uv venvs (a small stack); the engine is the FAULT-INJECTION
harness, so the tests control how long tasks take.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import FAULT_HARNESS, REPO, fault_env, fault_project, one_line_error, project_argv

from ablation.errors import AblationError
from ablation.execution.machine import Gpu, Machine
from ablation.execution.plan import Planner
from ablation.execution.sweep import leg_order
from ablation.spec.scenarios import load_scenarios
from ablation.util.jsonio import read_jsonl

pytestmark = pytest.mark.uv


@pytest.fixture
def project(tmp_path):
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, workloads: [mixed]}}" for i in range(3)]
    return fault_project(tmp_path, {"la": "1.16.0", "lb": "1.16.0"}, models)


def argv(project: Path, *extra: str) -> list[str]:
    return project_argv(project, "run", "--scenarios", str(project / "table.yaml"),
                        "--results", str(project / "results"), "--harness", str(FAULT_HARNESS), *extra)


def env(project: Path, slow: float, hang: str = "") -> dict:
    return fault_env(project, slow_s=slow, hang_modes=hang)


def start(project, slow, *extra, hang: str = "") -> subprocess.Popen:
    return subprocess.Popen(argv(project, *extra), cwd=REPO, env=env(project, slow, hang),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_event(events: Path, kind: str, count: int = 1, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(e["event"] == kind for e in read_jsonl(events)) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"no {count} x {kind} in {events} after {timeout} s")


def test_second_sweep_refuses_or_waits(project):
    subprocess.run(argv(project, "--leg", "la", "--run-id", "warm"), cwd=REPO, env=env(project, 0), check=True,
                   capture_output=True)  # builds the venv outside the timed part
    first = start(project, 3, "--leg", "la", "--run-id", "first")
    wait_for_event(project / "results/first/run.jsonl", "task_start")
    refused = subprocess.run(argv(project, "--leg", "la", "--run-id", "second"), cwd=REPO, env=env(project, 0),
                             capture_output=True, text=True)
    line = one_line_error(refused)
    assert "another sweep holds this machine" in line and "run first" in line and "--wait" in line
    assert not (project / "results/second").exists()
    waited = subprocess.run(argv(project, "--leg", "la", "--run-id", "third", "--wait"), cwd=REPO,
                            env=env(project, 0), capture_output=True, text=True)
    assert first.wait() == 0 and waited.returncode == 0, waited.stderr
    first_end = read_jsonl(project / "results/first/run.jsonl")[-1]["ts"]
    third_start = read_jsonl(project / "results/third/run.jsonl")[0]["ts"]
    assert third_start >= first_end, "the waiting sweep started before the first one ended"


def test_sigkill_mid_sweep_then_resume_loses_and_duplicates_nothing(project):
    events = project / "results/r/run.jsonl"
    # The fifth task (la's slow-2, after both legs' slow-0 and slow-1) hangs in this first runner:
    # killing the runner leaves it orphaned.
    runner = start(project, 1, "--leg", "la", "--leg", "lb", "--run-id", "r", hang="slow-2")
    wait_for_event(events, "task_end", 4, timeout=300)
    wait_for_event(events, "task_pid", 5)
    interrupted = [e for e in read_jsonl(events) if e["event"] == "task_pid"][-1]
    leg, slug, _ = interrupted["task_id"].split("/")
    child_pid_file = project / "results/r" / leg / slug / "child.pid"
    deadline = time.monotonic() + 60  # the hanging harness has started its engine child
    while not child_pid_file.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)  # the pid is written whole
    child = int(child_pid_file.read_text())
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    # the task's group leader (die_with_parent) is told by the kernel that its runner died, and
    # ends the whole group: the harness AND its engine child, before anyone resumes anything
    gone_by = time.monotonic() + 5
    while (_alive(interrupted["pid"]) or _alive(child)) and time.monotonic() < gone_by:
        time.sleep(0.1)
    task_alive_after_kill = [p for p in (interrupted["pid"], child) if _alive(p)]
    before = events.read_bytes()
    ended_before = [e["task_id"] for e in read_jsonl(events) if e["event"] == "task_end"]
    interrupted = [e for e in read_jsonl(events) if e["event"] == "task_pid"][-1]
    assert len(ended_before) == 4

    resumed = subprocess.run(argv(project, "--leg", "la", "--leg", "lb", "--resume", "r"), cwd=REPO,
                             env=env(project, 0.5), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    after = events.read_bytes()
    assert after.startswith(before), "run.jsonl was rewritten, not appended"
    ev = read_jsonl(events)
    ends = [e["task_id"] for e in ev if e["event"] == "task_end"]
    assert sorted(ends) == sorted(set(ends)) and len(ends) == 6, ends  # every task once, none twice
    resume = next(e for e in ev if e["event"] == "run_resume")
    assert resume["already_done"] == 4 and len(resume["todo"]) == 2
    # The interrupted task's first attempt left its log; the redo is attempt 2 beside it.
    leg, slug, _ = interrupted["task_id"].split("/")
    d = project / "results/r" / leg / slug
    assert (d / "run.log").is_file() and (d / "results.r1a2.json").is_file() and not (d / "results.json").exists()
    assert json.loads((d / "results.r1a2.json").read_text())["status"] == "PASS"
    assert task_alive_after_kill == [], "the killed runner's task kept running"
    assert not [e for e in ev if e["event"] == "orphan_killed"]  # nothing was left for the resume to end
    assert (project / "results/r/MANIFEST.json").is_file() and (project / "results/r/MANIFEST.resume-1.json").is_file()


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its new parent, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_repeats_interleave_legs_round_by_round(project):
    assert leg_order(["a", "b", "c"], 3) == [(1, ["a", "b", "c"]), (2, ["c", "b", "a"]), (3, ["a", "b", "c"])]
    proc = subprocess.run(argv(project, "--leg", "la", "--leg", "lb", "--run-id", "rep", "--repeats", "2"),
                          cwd=REPO, env=env(project, 0), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    order = [e["task_id"] for e in read_jsonl(project / "results/rep/run.jsonl") if e["event"] == "task_start"]
    # round by round, and within a round model by model with the round's legs side by side
    assert order == [f"{leg}/fault__slow-{i}/r{r}" for r, legs in ((1, ["la", "lb"]), (2, ["lb", "la"]))
                     for i in range(3) for leg in legs]
    rec = json.loads((project / "results/rep/la/fault__slow-0/results.r2a1.json").read_text())
    assert rec["repeat"] == 2 and rec["gpu_check"] == "no GPU"


def test_repeat_order_model_runs_every_round_of_a_model_before_the_next_and_resume_keeps_it(project):
    """A leased machine that stops early must leave whole models: with --repeat-order model a stop
    after 2 models' tasks has both models' every repeat on both legs, and a resume with the other
    order is refused (the run would change what a stop leaves)."""
    proc = subprocess.run(argv(project, "--leg", "la", "--leg", "lb", "--run-id", "bymodel", "--repeats", "2",
                               "--repeat-order", "model"), cwd=REPO, env=env(project, 0), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = project / "results/bymodel"
    order = [e["task_id"] for e in read_jsonl(run / "run.jsonl") if e["event"] == "task_start"]
    assert order == [f"{leg}/fault__slow-{i}/r{r}" for i in range(3)
                     for r, legs in ((1, ["la", "lb"]), (2, ["lb", "la"])) for leg in legs]
    assert json.loads((run / "MANIFEST.json").read_text())["repeat_order"] == "model"
    before = (run / "run.jsonl").read_bytes()
    line = one_line_error(subprocess.run(argv(project, "--leg", "la", "--leg", "lb", "--resume", "bymodel",
                                              "--repeats", "2"), cwd=REPO, env=env(project, 0),
                                         capture_output=True, text=True))
    assert "was started with --repeat-order model; resume with the same order" in line
    assert (run / "run.jsonl").read_bytes() == before


def test_model_runs_only_those_models_of_the_unchanged_table(project):
    """--model picks models of the table (one finding per leased machine) without a second table:
    the run records the table's own sha256 and the selection; an id not in the table, or a resume
    with another selection, is one error line and records nothing."""
    proc = subprocess.run(argv(project, "--leg", "la", "--run-id", "one", "--model", "fault/slow-2"), cwd=REPO,
                          env=env(project, 0), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = project / "results/one"
    started = [e["task_id"] for e in read_jsonl(run / "run.jsonl") if e["event"] == "task_start"]
    assert started == ["la/fault__slow-2/r1"]
    manifest = json.loads((run / "MANIFEST.json").read_text())
    assert manifest["models"] == ["fault/slow-2"]
    assert manifest["scenario_table"]["sha256"] == load_scenarios(project / "table.yaml").sha256
    line = one_line_error(subprocess.run(argv(project, "--leg", "la", "--run-id", "two", "--model", "fault/nope"),
                                         cwd=REPO, env=env(project, 0), capture_output=True, text=True))
    assert "--model: fault/nope not in" in line and "table.yaml" in line
    assert not (project / "results/two").exists()
    before = (run / "run.jsonl").read_bytes()
    line = one_line_error(subprocess.run(argv(project, "--leg", "la", "--resume", "one"), cwd=REPO,
                                         env=env(project, 0), capture_output=True, text=True))
    assert "was started with fault/slow-2; resume with the same --model" in line
    assert (run / "run.jsonl").read_bytes() == before


def test_resume_of_unknown_run_and_duplicate_run_id_are_one_line_errors(project):
    proc = subprocess.run(argv(project, "--leg", "la", "--resume", "nope"), cwd=REPO, env=env(project, 0),
                          capture_output=True, text=True)
    assert "cannot resume run 'nope'" in one_line_error(proc)
    subprocess.run(argv(project, "--leg", "la", "--run-id", "x"), cwd=REPO, env=env(project, 0), check=True,
                   capture_output=True)
    before = (project / "results/x/run.jsonl").read_bytes()
    proc = subprocess.run(argv(project, "--leg", "la", "--run-id", "x"), cwd=REPO, env=env(project, 0),
                          capture_output=True, text=True)
    assert "already exists" in one_line_error(proc)
    assert (project / "results/x/run.jsonl").read_bytes() == before
    # resuming with another table or other legs would mix two studies in one run
    (project / "table.yaml").write_text((project / "table.yaml").read_text() + "# edited\n")
    proc = subprocess.run(argv(project, "--leg", "la", "--resume", "x"), cwd=REPO, env=env(project, 0),
                          capture_output=True, text=True)
    assert "is not the table run 'x' started with" in one_line_error(proc)
    assert (project / "results/x/run.jsonl").read_bytes() == before


def test_a_leg_given_by_path_runs_and_records_as_that_leg(project):
    path = project / "stacks" / "la.yaml"
    proc = subprocess.run(argv(project, "--leg", str(path), "--leg", "lb", "--run-id", "bypath"), cwd=REPO,
                          env=env(project, 0), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = project / "results" / "bypath"
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == ["la", "lb"]
    assert json.loads((run / "MANIFEST.json").read_text())["legs"] == ["la", "lb"]
    line = one_line_error(subprocess.run(argv(project, "--leg", str(path), "--leg", "la"), cwd=REPO,
                                         env=env(project, 0), capture_output=True, text=True, timeout=600))
    assert "leg 'la' given twice" in line


def leased_project(tmp_path: Path) -> Path:
    """Three timed fault models and one SKIP on a CPU machine, its venv built outside any timed run."""
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, workloads: [mixed]}}" for i in range(3)]
    models.append("{id: fault/ok, source: {path: model}, workloads: [mixed], requires: {platform: cuda}}")
    project = fault_project(tmp_path, {"la": "1.16.0"}, models)
    subprocess.run(argv(project, "--leg", "la", "--run-id", "warm"), cwd=REPO, env=env(project, 0), check=True,
                   capture_output=True)  # builds the venv outside the timed part
    return project


def mark_compiled(project: Path, leg: str) -> Path:
    """The leg has compiled on this machine: a file in its compile cache (returned), so its repeats start warm."""
    cache = project / f"venvs/{leg}/vllm-cache/torch_compile_cache/graph.py"
    cache.parent.mkdir(parents=True)
    cache.write_text("compiled\n")
    return cache


def compiled_leased_project(tmp_path: Path) -> tuple[Path, Path]:
    """`leased_project` on a machine where the leg has compiled: a file in its compile cache (returned)."""
    project = leased_project(tmp_path)
    return project, mark_compiled(project, "la")


def passed(project: Path, run_id: str) -> list[str]:
    """The run's PASS task ids, in the order they ended."""
    return [e["task_id"] for e in read_jsonl(project / f"results/{run_id}/run.jsonl")
            if e["event"] == "task_end" and e["status"] == "PASS"]


def test_stop_after_starts_no_task_that_cannot_finish_then_resume_completes(tmp_path):
    """A leased machine: --stop-after ends the sweep between tasks, never mid-task; a SKIP
    (free) is still recorded after the stop, so nothing reads as "not run" that was skipped."""
    project = leased_project(tmp_path)
    first = subprocess.run(argv(project, "--leg", "la", "--run-id", "lease", "--stop-after", "2.5"), cwd=REPO,
                           env=env(project, 1.5), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    events = read_jsonl(project / "results/lease/run.jsonl")
    ends = {e["task_id"]: e["status"] for e in events if e["event"] == "task_end"}
    assert ends == {"la/fault__slow-0/r1": "PASS", "la/fault__ok/r1": "SKIP"}  # 1.5 s + 1.5 s longest > 2.5 s
    stopped = [e for e in events if e["event"] == "run_stopped"]
    assert len(stopped) == 1 and stopped[0]["tasks_left"] == 2
    assert "--resume lease" in first.stderr
    resumed = subprocess.run(argv(project, "--leg", "la", "--resume", "lease"), cwd=REPO, env=env(project, 0),
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    ends = [e["task_id"] for e in read_jsonl(project / "results/lease/run.jsonl") if e["event"] == "task_end"]
    assert sorted(ends) == sorted([f"la/fault__slow-{i}/r1" for i in range(3)] + ["la/fault__ok/r1"])


def test_expect_task_stops_before_a_task_the_earlier_ones_do_not_predict(tmp_path):
    """Session 13's plan: after a 0.18 cold task (~160 s) the longest-so-far rule would start 0.26's cold
    task (~262 s) at the end of a call and lose it to the call's limit. --expect-task S judges every next
    task that starts cold (here each is a new model) as at least S: each takes about 1.5 s, and S = 30 with --stop-after 31 lets exactly one
    start (0 + 30 <= 31, then 1.5 + 30 > 31), where the longest-so-far rule alone would run all three."""
    project = leased_project(tmp_path)
    first = subprocess.run(argv(project, "--leg", "la", "--run-id", "lease", "--stop-after", "31",
                                "--expect-task", "30"), cwd=REPO, env=env(project, 1.5), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    events = read_jsonl(project / "results/lease/run.jsonl")
    ends = {e["task_id"]: e["status"] for e in events if e["event"] == "task_end"}
    assert ends == {"la/fault__slow-0/r1": "PASS", "la/fault__ok/r1": "SKIP"}
    (stopped,) = [e for e in events if e["event"] == "run_stopped"]
    assert stopped["tasks_left"] == 2 and stopped["expect_task_s"] == 30
    assert "--expect-task (30 s) for la/fault__slow-1/r1, which starts cold > --stop-after 31 s" in first.stderr
    # An expectation longer than the whole budget starts nothing (and still records the SKIP).
    none = subprocess.run(argv(project, "--leg", "la", "--run-id", "none", "--stop-after", "10",
                               "--expect-task", "20"), cwd=REPO, env=env(project, 0), capture_output=True, text=True)
    assert none.returncode == 0, none.stderr
    ends = {e["task_id"]: e["status"] for e in read_jsonl(project / "results/none/run.jsonl") if e["event"] == "task_end"}
    assert ends == {"la/fault__ok/r1": "SKIP"}
    # Without --stop-after it judges nothing: one error line, exit 2, no run.
    proc = subprocess.run(argv(project, "--leg", "la", "--run-id", "alone", "--expect-task", "20"), cwd=REPO,
                          env=env(project, 0), capture_output=True, text=True)
    assert proc.returncode == 2 and "--expect-task is a --stop-after judgement" in one_line_error(proc)
    assert not (project / "results/alone").exists()


def test_expect_task_judges_only_tasks_that_start_cold(tmp_path):
    """Session 14's whisper run: the call after the last part ran 0.29's cold task and a warm repeat,
    then stopped with 233 s left, judging a warm repeat (about 100 s) by --expect-task 240. E now judges
    only a task that starts cold: no earlier task of the run (this call or an earlier one) ran its leg
    and model, or its leg's caches are empty. A warm repeat is judged by the tasks before it."""
    project, cache = compiled_leased_project(tmp_path)
    base = ["--leg", "la", "--repeats", "2", "--repeat-order", "model"]

    # slow-0 r1 starts cold (0 + 30 <= 31); its r2 is warm (1.5 + 1.5 <= 31); slow-1 r1 is cold (3 + 30 > 31).
    warm = subprocess.run(argv(project, *base, "--run-id", "warm2", "--stop-after", "31", "--expect-task", "30"),
                          cwd=REPO, env=env(project, 1.5), capture_output=True, text=True)
    assert warm.returncode == 0, warm.stderr
    assert passed(project, "warm2") == ["la/fault__slow-0/r1", "la/fault__slow-0/r2"]
    (stopped,) = [e for e in read_jsonl(project / "results/warm2/run.jsonl") if e["event"] == "run_stopped"]
    assert stopped["next_task"] == "la/fault__slow-1/r1" and stopped["next_starts_cold"] is True
    assert stopped["predicted_s"] == 30
    assert "--expect-task (30 s) for la/fault__slow-1/r1, which starts cold" in warm.stderr
    # A resumed call knows what earlier calls ran: slow-1 r1 is cold and does not fit 29 s; after a first
    # call that ran only slow-0 r1, its r2 is warm and starts with nothing else to judge it by.
    first = subprocess.run(argv(project, *base, "--run-id", "resumed", "--stop-after", "2", "--expect-task", "1.9"),
                           cwd=REPO, env=env(project, 1.5), capture_output=True, text=True)
    assert first.returncode == 0 and passed(project, "resumed") == ["la/fault__slow-0/r1"], first.stderr
    again = subprocess.run(argv(project, *base, "--resume", "resumed", "--stop-after", "29", "--expect-task", "30"),
                           cwd=REPO, env=env(project, 1.5), capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert passed(project, "resumed") == ["la/fault__slow-0/r1", "la/fault__slow-0/r2"]
    # Empty caches (a fresh machine): the repeat starts cold too, so E judges it.
    cache.unlink()
    fresh = subprocess.run(argv(project, *base, "--run-id", "fresh", "--stop-after", "31", "--expect-task", "30"),
                           cwd=REPO, env=env(project, 1.5), capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr
    assert passed(project, "fresh") == ["la/fault__slow-0/r1"]


def test_a_warm_task_is_judged_by_its_own_leg_and_models_warm_tasks_from_earlier_calls(tmp_path):
    """A call's first task used to start unjudged, and later ones were judged by this call's tasks only,
    though one leg's warm start-up can be slower than another's (session 14: 0.26's warm whisper tasks
    took 106-115 s, 0.29's 87-98 s). A warm task is now judged by the longest warm task of its own leg and
    model in the run too, from earlier calls included; the first of them (its cold start) is left out."""
    project, _cache = compiled_leased_project(tmp_path)
    base = ["--leg", "la", "--repeats", "3", "--repeat-order", "model"]

    # First call: slow-0 r1 and r2 take 3 s each; r3 does not fit 8 s (6 + 3).
    first = subprocess.run(argv(project, *base, "--run-id", "hist", "--stop-after", "8"), cwd=REPO,
                           env=env(project, 3), capture_output=True, text=True)
    assert first.returncode == 0 and passed(project, "hist") == ["la/fault__slow-0/r1", "la/fault__slow-0/r2"], first.stderr
    # Second call, 2 s: r3 is warm, and r2 (warm, 3 s) predicts it; nothing starts.
    second = subprocess.run(argv(project, *base, "--resume", "hist", "--stop-after", "2"), cwd=REPO,
                            env=env(project, 0.2), capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert passed(project, "hist") == ["la/fault__slow-0/r1", "la/fault__slow-0/r2"]
    stops = [e for e in read_jsonl(project / "results/hist/run.jsonl") if e["event"] == "run_stopped"]
    assert stops[-1]["next_task"] == "la/fault__slow-0/r3" and stops[-1]["next_starts_cold"] is False
    assert stops[-1]["predicted_s"] >= 3
    assert "the longest warm task of la/fault__slow-0 so far (3 s) > --stop-after 2 s" in second.stderr
    # With 4 s it starts; the next model's first task has no history and starts on this call's 0.2 s.
    third = subprocess.run(argv(project, *base, "--resume", "hist", "--stop-after", "4"), cwd=REPO,
                           env=env(project, 0.2), capture_output=True, text=True)
    assert third.returncode == 0, third.stderr
    assert passed(project, "hist")[:4] == ["la/fault__slow-0/r1", "la/fault__slow-0/r2", "la/fault__slow-0/r3",
                                "la/fault__slow-1/r1"]


def test_a_warm_task_whose_leg_has_no_warm_history_is_judged_by_the_same_models_warm_tasks_on_other_legs(tmp_path):
    """Session 18 (Qwen3-VL 29/26 on an H100): the last call had 180 s, and 0.26's first warm task had no warm
    task of its own leg and model before it, so nothing judged it: it started, ran about 150 s, and the
    call's own timeout ended the run before the task was recorded. 0.29's warm task of the same model had
    taken 138 s. Such a task is now judged by the same model's warm tasks on the run's other legs."""
    models = [f"{{id: fault/slow-{i}, source: {{path: model}}, workloads: [mixed]}}" for i in range(2)]
    project = fault_project(tmp_path, {"la": "1.16.0", "lb": "1.16.0"}, models)
    base = ["--leg", "la", "--leg", "lb", "--repeats", "2", "--repeat-order", "model"]
    subprocess.run(argv(project, *base, "--run-id", "warm"), cwd=REPO, env=env(project, 0), check=True,
                   capture_output=True)  # builds both venvs outside the timed part
    for leg in ("la", "lb"):  # both legs have compiled on this machine: their repeats start warm
        mark_compiled(project, leg)

    # First call, 3 s per task: la r1, lb r1, lb r2 (the rounds alternate: la lb, lb la); la r2 does not fit 10 s.
    first = subprocess.run(argv(project, *base, "--run-id", "other", "--stop-after", "10"), cwd=REPO,
                           env=env(project, 3), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert passed(project, "other") == ["la/fault__slow-0/r1", "lb/fault__slow-0/r1", "lb/fault__slow-0/r2"]
    # Second call, 2 s: la r2 is warm and la has run no warm slow-0; lb's warm one (3 s) predicts it.
    second = subprocess.run(argv(project, *base, "--resume", "other", "--stop-after", "2"), cwd=REPO,
                            env=env(project, 0.2), capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert passed(project, "other") == ["la/fault__slow-0/r1", "lb/fault__slow-0/r1", "lb/fault__slow-0/r2"]
    stops = [e for e in read_jsonl(project / "results/other/run.jsonl") if e["event"] == "run_stopped"]
    assert stops[-1]["next_task"] == "la/fault__slow-0/r2" and stops[-1]["next_starts_cold"] is False
    assert stops[-1]["predicted_s"] >= 3
    assert ("the longest warm task of fault__slow-0 on another leg so far (3 s; la/fault__slow-0 has run none warm)"
            " > --stop-after 2 s") in second.stderr
    # With 4 s it starts, and then la's own warm task (0.2 s) is its history; the next model starts cold, unjudged.
    third = subprocess.run(argv(project, *base, "--resume", "other", "--stop-after", "4"), cwd=REPO,
                           env=env(project, 0.2), capture_output=True, text=True)
    assert third.returncode == 0, third.stderr
    assert passed(project, "other")[3:5] == ["la/fault__slow-0/r2", "la/fault__slow-1/r1"]


def test_engine_env_that_a_stack_sets_differently_is_a_one_line_error(tmp_path):
    models = ["{id: fault/ok, source: {path: model}, workloads: [mixed], engine_env: {VLLM_X: '2'}}"]
    project = fault_project(tmp_path, {"la": "1.16.0"}, models)
    stack = project / "stacks/la.yaml"
    stack.write_text(stack.read_text() + 'env:\n  VLLM_X: "1"\n')
    proc = subprocess.run(argv(project, "--leg", "la", "--run-id", "clash"), cwd=REPO, env=env(project, 0),
                          capture_output=True, text=True)
    line = one_line_error(proc)
    assert "table.yaml: field 'engine_env' of fault/ok: VLLM_X also set differently by" in line and "la.yaml" in line
    assert not (project / "results/clash").exists()


def _gpu_node(name: str, cc: float, n: int) -> Machine:
    gpus = [Gpu(i, name, cc, 143771, None, None, f"GPU-{name}-{i}") for i in range(n)]
    return Machine("node", "Intel Xeon", 64, 1024.0, "575.57", "12.9", gpus)


def test_skip_is_decided_per_architecture_on_its_own_nodes_and_unlike_nodes_are_an_error(tmp_path):
    """One table, two architectures: the NVFP4 model is SKIP on Hopper only, the tp 2 model is SKIP
    where a node has one GPU; two nodes of one architecture that disagree name both reasons."""
    (tmp_path / "t.yaml").write_text(
        "name: arch\nworkloads: {mixed: {kind: throughput, num_prompts: 4, input_len: {min: 8, max: 8}, output_len: 8}}\n"
        "models:\n"
        "  - {id: org/nvfp4, source: {path: m}, workloads: [mixed],\n"
        "     requires: {platform: cuda, min_compute_capability: 10.0, reason: NVFP4 needs Blackwell}}\n"
        "  - {id: org/tp2, source: {path: m}, tp: 2, workloads: [mixed], requires: {min_gpus: 2}}\n")
    table = load_scenarios(tmp_path / "t.yaml").table
    h200, b200 = _gpu_node("NVIDIA H200", 9.0, 8), _gpu_node("NVIDIA B200", 10.0, 8)
    assert Planner.skip_reasons(table, "nvidia-h200-sm90", [h200, h200]) == {
        "org/nvfp4": "needs compute capability >= 10.0, this machine has 9.0 (NVFP4 needs Blackwell)",
        "org/tp2": None}
    assert Planner.skip_reasons(table, "nvidia-b200-sm100", [b200]) == {"org/nvfp4": None, "org/tp2": None}
    with pytest.raises(AblationError) as err:
        Planner.skip_reasons(table, "nvidia-h200-sm90", [h200, _gpu_node("NVIDIA H200", 9.0, 1)])
    assert str(err.value) == ("--arch nvidia-h200-sm90: its nodes differ on model org/tp2 (can run it; needs 2 GPUs, "
                              "this machine has 1); start unlike nodes with different `ablation node-resources --arch` names")
