"""Issue 25: hostile and malformed input. Nothing deleted, nothing executed, no traceback.

One regression test per item of the issue (item 4, the results loader, is tested with it);
each drives the real CLI in a subprocess where the issue's reproduction did. The rule under
test: one `error:` line naming the file and field, exit 2 -- never a traceback, never a
deletion outside what the tool created, never a user string reaching a shell.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import FAULT_HARNESS, ONE_TOKEN, REPO, SIX_STACK, fault_env, fault_project, one_line_error, project_argv
from resultfactory import write_result

from ablation.errors import AblationError
from ablation.util.jsonio import read_jsonl
from ablation.util.timestamps import utc_stamp

pytestmark = pytest.mark.uv  # the fault-injection project builds a real (small) leg with uv


def cli(project: Path, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(project_argv(project, *args), cwd=REPO, env=env or fault_env(project), capture_output=True,
                          text=True, timeout=timeout)


def table(root: Path, models: list[str], workloads: str | None = None, name: str = "t.yaml") -> Path:
    path = root / name
    path.write_text("name: hostile\nworkloads:\n" + (workloads or f"  mixed: {ONE_TOKEN}\n") + "models:\n"
                    + "".join(f"  - {m}\n" for m in models))
    return path


def run_argv(project: Path, scenarios: Path, *extra: str) -> list[str]:
    return ["run", "--scenarios", str(scenarios), "--results", str(project / "results"),
            "--harness", str(FAULT_HARNESS), *extra]


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return fault_project(root, {"la": "1.16.0"}, ["{id: fault/ok, source: {path: model}, workloads: [mixed]}"])


# 1. A stack file named ..yaml or .yaml deleted directories --------------------------------------------


@pytest.mark.parametrize("file_name, leg", [("..yaml", "."), ("...yaml", ".."), (".yaml", ".yaml")])
def test_1_dot_leg_names_are_refused_and_delete_nothing(project, file_name, leg):
    (project / "stacks" / file_name).write_text(SIX_STACK.format(leg=leg, version="1.16.0").replace(
        f'leg: "{leg}"\n', ""))  # the leg comes from the file name, as in the issue
    other = project / "venvs" / "other-leg"
    other.mkdir(parents=True)
    (other / "keep.txt").write_text("another leg's venv")
    (project / "keep.txt").write_text("beside the venv root")
    for args in (("stacks", "build", leg), ("stacks", "build", str(project / "stacks" / file_name)),
                 ("stacks", "env", str(project / "stacks" / file_name)),
                 run_argv(project, project / "table.yaml", "--leg", str(project / "stacks" / file_name))):
        line = one_line_error(cli(project, *args))
        assert "leg" in line, line
    listed = cli(project, "stacks", "list")  # the other legs are still listed, the bad file named
    assert listed.returncode == 0 and "la " in listed.stdout and file_name in listed.stderr, listed.stderr
    assert (other / "keep.txt").read_text() == "another leg's venv"
    assert (project / "keep.txt").is_file() and (project / "stacks" / "la.yaml").is_file()


def test_1_builder_removes_only_folders_inside_its_root(tmp_path):
    from ablation.envs.builder import VenvBuilder

    root = tmp_path / "venvs"
    (root / "a").mkdir(parents=True)
    (tmp_path / "keep.txt").write_text("x")
    b = VenvBuilder(root, tmp_path / "patches", log=lambda m: None)
    for path in (root, root / ".", root / "..", tmp_path, root / "a" / "..", root / "a" / "sub"):
        with pytest.raises(AblationError, match="refusing to delete"):
            b._remove_venv(path)
    assert (root / "a").is_dir() and (tmp_path / "keep.txt").is_file()
    b._remove_venv(root / "a")
    assert not (root / "a").exists() and root.is_dir()


# 2. Shell injection through a stack's env keys -------------------------------------------------------


@pytest.mark.parametrize("name", ["X=1; touch {f}; Y", "", "A=B", "1X", "X Y", "X\nY", "$(touch {f})"])
def test_2_env_names_that_are_not_posix_names_are_refused(project, name):
    pwned = project / "PWNED"
    name = name.format(f=pwned)
    (project / "stacks" / "bad.yaml").write_text(SIX_STACK.format(leg="bad", version="1.16.0")
                                                 + f"env:\n  {json.dumps(name)}: v\n")
    line = one_line_error(cli(project, "stacks", "env", "bad"))
    assert "bad.yaml" in line and "env" in line and "POSIX" in line
    bash = subprocess.run(["bash", "-c", 'eval "$("$@")"', "bash", *project_argv(project, "stacks", "env", "bad")],
                          cwd=REPO, capture_output=True, text=True, env=fault_env(project))
    assert not pwned.exists(), bash.stderr
    # the same name in a scenario's engine_env: refused before any task starts
    scen = table(project, ["{id: fault/ok, source: {path: model}, workloads: [mixed], engine_env: {"
                           + json.dumps(name) + ": v}}"])
    line = one_line_error(cli(project, *run_argv(project, scen, "--leg", "la")))
    assert "t.yaml" in line and "engine_env" in line
    assert not pwned.exists() and not (project / "results").exists()


def test_2_stacks_env_output_is_safe_to_eval_whatever_the_values(project):
    pwned = project / "PWNED"
    values = {"A": f"$(touch {pwned})", "B": f"`touch {pwned}`", "C": f"'; touch {pwned}; '",
              "D": "line1\nline2", "E": '"\\$HOME', "F": ""}
    (project / "stacks" / "vals.yaml").write_text(SIX_STACK.format(leg="vals", version="1.16.0")
                                                  + "env:\n" + "".join(f"  {k}: {json.dumps(v)}\n"
                                                                       for k, v in values.items()))
    script = 'eval "$("$@")" && printf "%s\\0" "$A" "$B" "$C" "$D" "$E" "$F"'
    proc = subprocess.run(["bash", "-c", script, "bash", *project_argv(project, "stacks", "env", "vals")],
                          cwd=REPO, capture_output=True, text=True, env=fault_env(project))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\0")[:-1] == list(values.values())  # every value arrives byte for byte
    assert not pwned.exists()


# 3. Model ids and run ids as path components ---------------------------------------------------------


@pytest.mark.parametrize("ids, expect", [
    (["p q/slow"], "models.0.id"),
    (["p_q/slow", "p_q__slow"], "share the results folder"),
    (["fault/Ok", "fault/ok"], "share the results folder"),
    ([".."], "models.0.id"),
    (["."], "models.0.id"),
    (["a/../b"], "models.0.id"),
    (["/abs"], "models.0.id"),
    (["a" * 300], "at most 100"),
    (["a|b"], "models.0.id"),
])
def test_3_model_ids_must_be_safe_unique_folder_names(project, ids, expect):
    scen = table(project, [f"{{id: {json.dumps(i)}, source: {{path: model}}, workloads: [mixed]}}" for i in ids])
    line = one_line_error(cli(project, *run_argv(project, scen, "--leg", "la")))
    assert str(scen) in line and expect in line, line
    assert not (project / "results").exists()


@pytest.mark.parametrize("option", ["--run-id", "--resume"])
@pytest.mark.parametrize("run_id", ["../../x", "{abs}", "..", ".", "a/b", "x\ny", ""])
def test_3_run_ids_cannot_escape_results(project, option, run_id):
    escaped = project.parent / "escaped-run"  # an absolute --run-id
    proc = cli(project, *run_argv(project, project / "table.yaml", "--leg", "la", option,
                                  run_id.format(abs=escaped)))
    line = one_line_error(proc)
    assert option in line
    assert not (project / "results").exists() and not (project.parent / "x").exists() and not escaped.exists()


# 5. Output commands never destroy files they did not write --------------------------------------------


def test_5_make_tiny_model_refuses_a_directory_it_did_not_write(tmp_path, project):
    mine = tmp_path / "work"
    mine.mkdir()
    (mine / "notes.txt").write_text("hand-written")
    line = one_line_error(cli(project, "make-tiny-model", str(mine)))
    assert str(mine) in line and "ABLATION_TINY_MODEL.json" in line
    assert (mine / "notes.txt").read_text() == "hand-written" and len(list(mine.iterdir())) == 1
    # its own directory it replaces; a file is refused
    model = tmp_path / "tiny"
    first = cli(project, "make-tiny-model", str(model))
    assert first.returncode == 0, first.stderr
    again = cli(project, "make-tiny-model", str(model), "--seed", "1")
    assert again.returncode == 0 and first.stdout.split()[-1] != again.stdout.split()[-1]
    assert "not empty" not in one_line_error(cli(project, "make-tiny-model", str(mine / "notes.txt")))
    assert not list(tmp_path.glob(".*tiny-model-tmp*"))  # no staging folder left behind


def _results(root: Path, legs=("0.1", "0.2"), value: float = 100.0) -> Path:
    for i, leg in enumerate(legs):
        write_result(root, leg, "m", {"mixed": value * (1 + i / 10)})
    return root


def test_5_report_out_replaces_only_what_it_wrote(tmp_path, project):
    results = _results(tmp_path / "results" / "run1")
    out = tmp_path / "report"
    out.mkdir()
    (out / "REPORT.md").write_text("my own notes")
    line = one_line_error(cli(project, "report", str(results), "--out", str(out)))
    assert str(out) in line and "ABLATION_REPORT.json" in line
    assert (out / "REPORT.md").read_text() == "my own notes"
    fresh = tmp_path / "fresh"
    assert cli(project, "report", str(results), "--out", str(fresh)).returncode == 0
    marker = json.loads((fresh / "ABLATION_REPORT.json").read_text())
    assert "REPORT.md" in marker["files"]
    (fresh / "tables" / "stale.csv").write_text("from an earlier report")
    marker["files"].append("tables/stale.csv")
    (fresh / "ABLATION_REPORT.json").write_text(json.dumps(marker))
    (fresh / "mine.txt").write_text("not the report's")
    again = cli(project, "report", str(results), "--out", str(fresh))
    assert again.returncode == 0, again.stderr
    assert not (fresh / "tables" / "stale.csv").exists() and (fresh / "mine.txt").read_text() == "not the report's"
    (tmp_path / "afile").write_text("x")
    assert "is a file" in one_line_error(cli(project, "report", str(results), "--out", str(tmp_path / "afile")))
    assert (tmp_path / "afile").read_text() == "x"


# 6. Races and leftovers ------------------------------------------------------------------------------


def _wait_for(path: Path, kind: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.get("event") == kind for e in read_jsonl(path)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {kind} in {path}")


def test_6_same_run_id_twice_with_wait_runs_once(project):
    argv = lambda rid, *x: project_argv(project, *run_argv(project, project / "table.yaml", "--leg", "la",  # noqa: E731
                                                            "--run-id", rid, *x))
    warm = subprocess.run(argv("warm"), cwd=REPO, env=fault_env(project), capture_output=True, text=True)
    assert warm.returncode == 0, warm.stderr
    slow = table(project, ["{id: fault/slow, source: {path: model}, workloads: [mixed]}"], name="slow.yaml")
    holder = subprocess.Popen(project_argv(project, *run_argv(project, slow, "--leg", "la", "--run-id", "holder")),
                              cwd=REPO, env=fault_env(project, slow_s=3600), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    _wait_for(project / "results/holder/run.jsonl", "task_pid")
    # both pass the "already exists" check while the holder has the machine, then queue behind it
    twins = [subprocess.Popen(argv("same", "--wait"), cwd=REPO, env=fault_env(project, slow_s=1),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for twin in twins:
        for line in twin.stderr:
            if line.startswith("[lock]"):
                break  # it is waiting for the lock: its check is behind it
    pid = next(e["pid"] for e in read_jsonl(project / "results/holder/run.jsonl") if e["event"] == "task_pid")
    os.killpg(pid, signal.SIGKILL)  # the holder's task ends (FAIL); the holder releases the lock
    holder.communicate(timeout=600)
    procs = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in twins]
    assert sorted(rc for rc, _, _ in procs) == [0, 2], procs
    refused = next(err for rc, _, err in procs if rc == 2)
    assert "already exists" in refused and "Traceback" not in refused
    events = read_jsonl(project / "results/same/run.jsonl")
    assert sum(e["event"] == "run_start" for e in events) == 1
    assert sum(e["event"] == "task_start" for e in events) == 1


def test_6_bisect_directories_are_unique_in_one_second_and_bad_threshold_leaves_none(project):
    from ablation.bisect.search import setup_bisect
    from ablation.spec.stacks import StackDir

    (project / "stacks" / "lb.yaml").write_text(SIX_STACK.format(leg="lb", version="1.17.0"))
    out = project / "bisect"
    now = time.time()
    for dt in range(0, 4):  # another bisect made this second's directory (and the next ones')
        (out / utc_stamp("id", now + dt)).mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    made = [setup_bisect(StackDir(root=project / "stacks", patches_dir=project / "patches"), project / "patches",
                         target="fault/ok/mixed", good="la", bad="lb", scenario_path=project / "table.yaml",
                         metric=None, threshold="5%", repeats=1, releases="1.16.5", out_root=out, wait=False,
                         harness=None).plan.out_dir for _ in range(2)]
    assert len(set(made)) == 2 and not set(made) & before
    for bad in ("abc", "5", "-1%", "1.2.3", "nan"):
        elsewhere = project / f"bisect-{bad}"
        proc = cli(project, "bisect", "--scenario", "fault/ok/mixed", "--good", "la", "--bad", "lb", "--scenarios",
                   str(project / "table.yaml"), "--threshold", bad, "--releases", "1.16.5", "--out", str(elsewhere))
        assert "--threshold" in one_line_error(proc)
        assert not elsewhere.exists()


# 7. Accepted nonsense --------------------------------------------------------------------------------


@pytest.mark.parametrize("model, workloads, field", [
    ("{id: fault/ok, source: {path: model}, workloads: [mixed], max_model_len: -1}", None, "max_model_len"),
    ("{id: fault/ok, source: {path: model}, workloads: [mixed], tp: 1000000000000000000000000000000}", None, "tp"),
    ("{id: fault/ok, source: {path: model}, workloads: [mixed], tp: 1.0e+30}", None, "tp"),
    ("{id: fault/ok, source: {path: model}, workloads: [mixed], tp: 1.5}", None, "tp"),
    ("{id: fault/ok, source: {path: model}, workloads: [mixed], requires: {min_gpus: -3}}", None, "min_gpus"),
    ("{id: fault/ok, source: {path: model}, workloads: [mixed], timeout_s: .inf}", None, "timeout_s"),
    ("{id: fault/ok, source: {path: model}, workloads: [mixed]}",
     "  mixed: {kind: throughput, num_prompts: 1.0e+12, input_len: {min: 1, max: 1}, output_len: 1}\n", "num_prompts"),
    ("{id: fault/ok, source: {path: model}, workloads: [mixed]}", f"  mixed: {ONE_TOKEN}\n  mixed: {ONE_TOKEN}\n",
     "duplicate key 'mixed' (first at line 3)"),
])
def test_7_nonsense_numbers_and_duplicate_keys_are_refused(project, model, workloads, field):
    scen = table(project, [model], workloads)
    line = one_line_error(cli(project, *run_argv(project, scen, "--leg", "la")))
    assert str(scen) in line and field in line, line
    assert not (project / "results").exists()


@pytest.mark.parametrize("config, field", [
    ({"model_type": "gemma4", "vocab_size": 262144, "vision_config": {"patch_size": "x"}}, "vision_config.patch_size"),
    ({"model_type": "gemma4", "text_config": {"vocab_size": 262144}, "vision_soft_tokens_per_image": 0},
     "vision_soft_tokens_per_image"),
    ({"model_type": "whisper", "vocab_size": 51866, "num_mel_bins": -3}, "num_mel_bins"),
    ({"model_type": "qwen2_vl", "vocab_size": "152064"}, "vocab_size"),
    ({"model_type": "qwen2_vl"}, "vocab_size"),
    ({"model_type": "qwen2_vl", "vocab_size": 1000}, "vocab_size"),  # cannot hold the family's ids
])
def test_7_a_config_field_the_tokenizer_synthesis_cannot_use_is_one_line(project, config, field):
    # a config-only multimodal model directory: its config.json is user input to the synthesis
    (project / "mm").mkdir()
    (project / "mm" / "config.json").write_text(json.dumps(config))
    scen = table(project, ["{id: fault/mm, source: {path: mm}, load_format: dummy, workloads: [mixed]}"])
    env = {**fault_env(project), "ABLATION_MODELS_ROOT": str(project / "models")}  # no cache from another run
    line = one_line_error(cli(project, *run_argv(project, scen, "--leg", "la"), env=env))
    assert str(scen) in line and "models.0.source.path" in line, line
    assert f"{project / 'mm'}/config.json: field '{field}'" in line, line
    assert not (project / "results").exists() and list((project / "models").iterdir()) == []  # no half copy left


@pytest.mark.parametrize("timeout", ["-5", "nan", "0", "inf"])
def test_7_timeout_must_be_positive_and_finite(project, timeout):
    line = one_line_error(cli(project, *run_argv(project, project / "table.yaml", "--leg", "la", "--timeout",
                                                 timeout)))
    assert "--timeout" in line and not (project / "results").exists()


def test_7_bisect_threshold_and_releases(project):
    from ablation.bisect.search import parse_threshold

    assert parse_threshold("5%") == 0.05 and parse_threshold("0.05") == 0.05 and parse_threshold(".5") == 0.5
    (project / "stacks" / "lb.yaml").write_text(SIX_STACK.format(leg="lb", version="1.17.0"))
    base = ["bisect", "--scenario", "fault/ok/mixed", "--good", "la", "--bad", "lb", "--scenarios",
            str(project / "table.yaml"), "--out", str(project / "bisect")]
    line = one_line_error(cli(project, *base, "--threshold", "5", "--releases", "1.16.5"))
    assert "5%" in line and "0.05" in line
    line = one_line_error(cli(project, *base, "--releases", "x;rm -rf /"))
    assert "--releases" in line and "x;rm -rf /" in line
    assert not (project / "bisect").exists()


@pytest.mark.parametrize("patch", ["/etc/passwd", "../" * 40 + "etc/passwd", "../stacks/la.yaml", ".", ""])
def test_7_patches_only_from_the_patches_directory(project, patch):
    (project / "stacks" / "p.yaml").write_text(SIX_STACK.format(leg="p", version="1.16.0")
                                               + f"patches: [{json.dumps(patch)}]\n")
    line = one_line_error(cli(project, "stacks", "show", "p"))
    assert "p.yaml" in line and "patches" in line


def test_7_patch_beside_the_stack_but_not_in_patches_dir_is_one_line(project, tmp_path):
    (project / "patches" / "fix.patch").write_text("--- a/x\n+++ b/x\n")
    (project / "stacks" / "p.yaml").write_text(SIX_STACK.format(leg="p", version="1.16.0") + "patches: [fix.patch]\n")
    other = tmp_path / "other-patches"
    other.mkdir()
    argv = ["--stacks-dir", str(project / "stacks"), "--patches-dir", str(other), "--venv-root",
            str(project / "venvs"), "stacks", "show", "p"]
    import sys
    proc = subprocess.run([sys.executable, "-m", "ablation.cli", *argv], cwd=REPO, capture_output=True, text=True)
    line = one_line_error(proc)
    assert "fix.patch" in line and str(other) in line and "--patches-dir" in line


# 8. Tracebacks instead of one line -------------------------------------------------------------------


def test_8_unreadable_inputs_are_one_line(project, tmp_path):
    latin = project / "latin1.yaml"
    latin.write_bytes((project / "table.yaml").read_bytes().replace(b"name: faults", b"name: caf\xe9"))
    assert "UTF-8" in one_line_error(cli(project, *run_argv(project, latin, "--leg", "la")))
    assert "directory" in one_line_error(cli(project, *run_argv(project, project / "stacks", "--leg", "la")))
    results = _results(tmp_path / "results" / "run1")
    (tmp_path / "results" / "CANONICAL.yaml").mkdir()
    line = one_line_error(cli(project, "canonical", str(tmp_path / "results"), "--force"))
    assert "CANONICAL.yaml" in line and "directory" in line
    assert results.is_dir()


def test_8_model_id_with_a_pipe_or_newline_cannot_break_a_table(project):
    for bad in ("a|b", "a\nb", "a\tb"):
        scen = table(project, [f"{{id: {json.dumps(bad)}, source: {{path: model}}, workloads: [mixed]}}"])
        line = one_line_error(cli(project, *run_argv(project, scen, "--leg", "la")))
        assert "models.0.id" in line


def test_8_compare_arch_with_nan_is_not_nanx(tmp_path, project):
    a, b = _results(tmp_path / "a" / "run"), _results(tmp_path / "b" / "run")
    victim = next(b.rglob("results.json"))
    rec = json.loads(victim.read_text())
    rec["workloads"]["mixed"]["value"] = float("nan")
    victim.write_text(json.dumps(rec))
    assert "NaN" in victim.read_text()
    proc = cli(project, "compare-arch", str(tmp_path / "a"), str(tmp_path / "b"), "--names", "A,B", "--all-rows")
    assert "Traceback" not in proc.stderr and "nan" not in proc.stdout.lower(), (proc.stdout, proc.stderr)
    assert proc.returncode in (0, 2)
    if proc.returncode == 2:
        one_line_error(proc)
    assert "--names" in one_line_error(cli(project, "compare-arch", str(a), str(b), "--names", "A|x,B"))
    assert "--threshold" in one_line_error(cli(project, "compare-arch", str(a), str(b), "--threshold", "nan"))


def test_messages_are_one_line_even_when_the_input_holds_newlines(project):
    weird = project / "stacks" / "we\nird.yaml"
    weird.write_text("platform: [\n")
    proc = cli(project, "stacks", "show", str(weird))
    one_line_error(proc)
    assert os.path.exists(weird)
