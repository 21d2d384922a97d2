"""`ablation scenarios check`: what a machine will run of a table, and what is SKIP and why, before any
GPU time is spent; judged by the sweep's own rule (Machine.unmet with the model's tp)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import one_line_error, run_cli
from test_seed_table import SEED, seed_table, without_contract_fields

from ablation.execution.machine import Gpu, Machine, probe
from ablation.execution.plan import Planner
from ablation.execution.preflight import check, described_machine
from ablation.spec.scenarios import load_scenarios

TP_GT_1 = {"mistralai/Mixtral-8x7B-Instruct-v0.1": 2, "openai/gpt-oss-120b": 2, "Qwen/Qwen3-Next-80B-A3B-Instruct": 2,
           "moonshotai/Kimi-Linear-48B-A3B-Instruct": 2, "Qwen/Qwen3-VL-235B-A22B-Instruct-FP8": 4,
           "nvidia/GLM-5.2-NVFP4": 8}
GLM = "nvidia/GLM-5.2-NVFP4"


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory) -> Path:
    """scenarios/seed.yaml; while the schema lacks the contract's media/label, the same table without
    them (beside a link to scenarios/configs), so the check is exercised on the seed's shape today."""
    _, rejected = seed_table()
    if rejected is None:
        return SEED
    d = tmp_path_factory.mktemp("seed")
    (d / "configs").symlink_to(SEED.parent / "configs")
    path = d / "seed.yaml"
    path.write_text(yaml.safe_dump(without_contract_fields(SEED.read_text()), sort_keys=False))
    return path


def verdicts(stdout: str) -> dict[str, str]:
    """model id -> 'RUN' or the SKIP reason, from the check's per-model lines."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("RUN  "):
            out[line.split()[1]] = "RUN"
        elif line.startswith("SKIP "):
            model, rest = line[5:].split("  ", 1)
            out[model] = rest.split(": ", 1)[1]
    return out


def gpu_machine(n: int, cc: float, mib: int = 143771) -> Machine:  # 143,771 MiB: an H200 as NVML reports it
    return Machine("node", "Xeon", 64, 1024.0, "575.57", "13.0",
                   [Gpu(i, "NVIDIA H200" if cc < 10 else "NVIDIA B200", cc, mib, None, None, f"g{i}") for i in range(n)])


H100_MIB = 81559  # NVIDIA H100 80GB HBM3 as NVML reports it (79.6 GiB)
JAMBA = "ai21labs/AI21-Jamba-Mini-1.7"
JAMBA_SKIP_H100 = ("needs 100 GiB of memory on each GPU, this machine's GPU has 79.6 GiB "
                   "(52B parameters: about 96 GiB of bf16 weights on one GPU)")


def test_on_this_cpu_machine_every_seed_model_is_skip_for_its_platform(seed_file):
    if probe().platform != "cpu":
        pytest.skip("this machine has GPUs")
    proc = run_cli("scenarios", "check", str(seed_file))
    assert proc.returncode == 0, proc.stderr
    v = verdicts(proc.stdout)
    assert len(v) == 15
    for model, why in v.items():
        assert why.startswith("needs platform cuda, this machine is cpu"), (model, why)
    assert "rows: 0 of 66 runnable here (0 of 34 throughput, 0 of 32 latency); 66 SKIP" in proc.stdout
    assert "models: 0 of 15 runnable here; 15 SKIP" in proc.stdout
    assert "15 per leg and repeat (0 run, 15 SKIP)" in proc.stdout


def test_one_hopper_gpu_runs_the_nine_single_gpu_models_and_says_why_not_the_rest(seed_file):
    proc = run_cli("scenarios", "check", str(seed_file), "--gpus", "1", "--compute-capability", "9.0")
    assert proc.returncode == 0, proc.stderr
    assert "machine: described: 1 GPU of compute capability 9.0" in proc.stdout
    v = verdicts(proc.stdout)
    assert v[GLM] == "needs compute capability >= 10.0, this machine has 9.0 (NVFP4 is Blackwell-only)"
    for model, tp in TP_GT_1.items():
        if model != GLM:
            assert v[model] == f"needs {tp} GPUs for tensor-parallel size {tp}, this machine has 1", model
    assert sorted(m for m, why in v.items() if why == "RUN") == sorted(
        ["meta-llama/Llama-3.1-8B-Instruct", "state-spaces/mamba-2.8b-hf", "mistralai/Mamba-Codestral-7B-v0.1",
         "ai21labs/AI21-Jamba-Mini-1.7", "openai/whisper-large-v3", "Qwen/Qwen2-VL-7B-Instruct",
         "Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen2.5-Omni-7B", "google/gemma-4-26B-A4B-it"])
    assert "rows: 41 of 66 runnable here (21 of 34 throughput, 20 of 32 latency); 25 SKIP" in proc.stdout
    assert "models: 9 of 15 runnable here; 6 SKIP" in proc.stdout


def test_eight_blackwell_gpus_run_everything_and_count_the_sweeps_tasks(seed_file):
    proc = run_cli("scenarios", "check", str(seed_file), "--gpus", "8", "--compute-capability", "10.0",
                   "--leg", "0.18", "--leg", "0.26", "--leg", "0.29", "--repeats", "3")
    assert proc.returncode == 0, proc.stderr
    assert set(verdicts(proc.stdout).values()) == {"RUN"}
    assert "rows: 66 of 66 runnable here" in proc.stdout
    assert "3 legs x 3 repeats = 135 tasks (135 run, 0 SKIP)" in proc.stdout
    legs = proc.stdout[proc.stdout.index("leg 0.18:"):].splitlines()
    assert "stacks/0.18.yaml loads: vllm 0.18.0, platform cuda" in legs[0]
    assert legs[1] == "  no per-model variant applies"
    assert legs[3] == "  variant gemma4-tf5.14.1 (transformers 5.14.1) applies to google/gemma-4-26B-A4B-it"
    assert legs[5] == "  no per-model variant applies"


def test_the_check_and_the_sweep_skip_for_the_same_reasons(seed_file):
    """Not a second copy of the rule: for every model, the check's reason is the sweep's."""
    sf = load_scenarios(seed_file)
    for machine in (gpu_machine(1, 9.0), gpu_machine(2, 9.0), gpu_machine(4, 10.0), gpu_machine(8, 10.0), probe()):
        sweep = Planner.skip_reasons(sf.table, None, [machine])
        assert {m.id: m.skip for m in check(sf, machine).models} == sweep


def test_tp_larger_than_the_gpus_is_skip_on_cuda_only():
    class Req:  # the fields Machine.unmet reads, nothing required
        platform = min_cpus = min_gpus = min_compute_capability = min_gpu_memory_gib = reason = None

    one = gpu_machine(1, 9.0)
    assert one.unmet(Req(), 2) == "needs 2 GPUs for tensor-parallel size 2, this machine has 1"
    assert one.unmet(Req(), 1) is None
    assert gpu_machine(4, 9.0).unmet(Req(), 4) is None
    cpu = Machine("host", "Xeon", 2, 24.0)  # tp ranks are processes on a CPU machine: min_cpus decides
    assert cpu.unmet(Req(), 4) is None


def test_a_model_bigger_than_one_gpus_memory_is_skip_with_its_reason_not_a_load_failure(seed_file):
    # Jamba-Mini's bf16 weights (~96 GiB) do not fit an H100's 80 GB: on such a machine the seed's row is
    # SKIP with the reason, as tp > GPUs is, both in the sweep's rule and in the check
    sf = load_scenarios(seed_file)
    assert Planner.skip_reasons(sf.table, None, [gpu_machine(1, 9.0, H100_MIB)])[JAMBA] == JAMBA_SKIP_H100
    assert Planner.skip_reasons(sf.table, None, [gpu_machine(1, 9.0)])[JAMBA] is None  # an H200 holds it
    two = gpu_machine(2, 9.0)  # the smallest GPU decides
    two.gpus[1] = Gpu(1, "NVIDIA H100 80GB HBM3", 9.0, H100_MIB, None, None, "g1")
    assert Planner.skip_reasons(sf.table, None, [two])[JAMBA] == JAMBA_SKIP_H100.replace(
        "this machine's GPU has", "this machine's smallest GPU has")

    h100 = run_cli("scenarios", "check", str(seed_file), "--gpus", "1", "--compute-capability", "9.0",
                   "--gpu-memory-gib", "79.6")
    assert h100.returncode == 0, h100.stderr
    assert "machine: described: 1 GPU of compute capability 9.0, 79.6 GiB each" in h100.stdout
    assert verdicts(h100.stdout)[JAMBA] == JAMBA_SKIP_H100
    assert "models: 8 of 15 runnable here; 7 SKIP" in h100.stdout
    # not described: not judged, and the check says so
    unsaid = run_cli("scenarios", "check", str(seed_file), "--gpus", "1", "--compute-capability", "9.0")
    assert verdicts(unsaid.stdout)[JAMBA] == "RUN"
    assert "(GPU memory not described: min_gpu_memory_gib not judged)" in unsaid.stdout


@pytest.mark.parametrize("value", ["-5", "nan", "0"])
def test_a_bad_gpu_memory_requirement_names_the_file_and_field(tmp_path, value):
    bad = tmp_path / "t.yaml"
    bad.write_text("name: t\nworkloads: {m: {kind: throughput, num_prompts: 1, input_len: {min: 8, max: 8}, "
                   "output_len: 8}}\nmodels:\n  - {id: org/a, source: {path: m}, workloads: [m], "
                   f"requires: {{platform: cuda, min_gpu_memory_gib: {value}}}}}\n")
    line = one_line_error(run_cli("scenarios", "check", str(bad)))
    assert line.startswith(f"error: {bad}: field 'models.0.requires.min_gpu_memory_gib':"), line


def test_the_sweep_skips_a_tp_the_node_cannot_hold(tmp_path):
    (tmp_path / "t.yaml").write_text(
        "name: tp\nworkloads: {mixed: {kind: throughput, num_prompts: 4, input_len: {min: 8, max: 8}, output_len: 8}}\n"
        "models:\n  - {id: org/tp4, source: {path: m}, tp: 4, workloads: [mixed], requires: {platform: cuda}}\n"
        "  - {id: org/tp1, source: {path: m}, workloads: [mixed], requires: {platform: cuda}}\n")
    table = load_scenarios(tmp_path / "t.yaml").table
    assert Planner.skip_reasons(table, None, [gpu_machine(2, 9.0)]) == {
        "org/tp4": "needs 4 GPUs for tensor-parallel size 4, this machine has 2", "org/tp1": None}
    assert Planner.skip_reasons(table, None, [gpu_machine(8, 9.0)]) == {"org/tp4": None, "org/tp1": None}


def test_a_leg_that_cannot_be_used_is_said_and_the_exit_is_1(seed_file):
    if probe().platform != "cpu":
        pytest.skip("this machine has GPUs")
    proc = run_cli("scenarios", "check", str(seed_file), "--leg", "0.26", "--leg", "no-such-leg")
    assert proc.returncode == 1, proc.stderr
    assert ("  the sweep refuses it here: " in proc.stdout
            and "0.26.yaml: field 'platform': leg 0.26 needs CUDA GPUs and this machine has none" in proc.stdout)
    assert "leg no-such-leg: does not load: unknown leg 'no-such-leg'" in proc.stdout
    proc = run_cli("scenarios", "check", str(seed_file), "--leg", "0.30-cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "leg 0.30-cpu:" in proc.stdout and "the sweep refuses it here" not in proc.stdout


def test_a_runnable_model_without_config_json_is_what_the_sweep_would_refuse(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "t.yaml").write_text(
        "name: t\nworkloads: {mixed: {kind: throughput, num_prompts: 4, input_len: {min: 8, max: 8}, output_len: 8}}\n"
        "models:\n  - {id: org/a, source: {path: empty}, workloads: [mixed]}\n")
    proc = run_cli("scenarios", "check", str(tmp_path / "t.yaml"))
    assert proc.returncode == 1
    assert f"the sweep would refuse it: {tmp_path / 't.yaml'}: field 'models.0.source.path': " in proc.stdout
    assert "has no config.json" in proc.stdout


@pytest.mark.parametrize("args, expect", [
    (["no/such/table.yaml"], "error: no/such/table.yaml: file not found"),
    (["scenarios/gpu.yaml", "--gpus", "1"], "error: --compute-capability: required with --gpus N > 0"),
    (["scenarios/gpu.yaml", "--compute-capability", "9.0"], "error: --compute-capability/--cpus/--gpu-memory-gib describe a machine"),
    (["scenarios/gpu.yaml", "--gpus", "0", "--compute-capability", "9.0"], "error: --compute-capability: a machine with --gpus 0"),
    (["scenarios/gpu.yaml", "--gpus", "-1"], "error: --gpus: -1 is negative"),
    (["scenarios/gpu.yaml", "--gpus", "1", "--compute-capability", "900"], "error: --compute-capability: 900.0 is not"),
    (["scenarios/gpu.yaml", "--repeats", "0"], "error: --repeats: 0 must be at least 1"),
    (["scenarios/gpu.yaml", "--gpu-memory-gib", "80"], "error: --compute-capability/--cpus/--gpu-memory-gib describe"),
    (["scenarios/gpu.yaml", "--gpus", "1", "--compute-capability", "9.0", "--gpu-memory-gib", "-1"],
     "error: --gpu-memory-gib: -1.0 is not the memory of a described GPU"),
])
def test_bad_input_is_one_error_line_and_exit_2(args, expect):
    line = one_line_error(run_cli("scenarios", "check", *args))
    assert line.startswith(expect), line


def test_a_bad_table_names_its_file_and_field(tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text((Path(__file__).parent.parent / "scenarios/gpu.yaml").read_text().replace("tp: 2", "tp: two"))
    line = one_line_error(run_cli("scenarios", "check", str(bad)))
    assert line.startswith(f"error: {bad}: field 'models.1.tp':"), line


def test_described_machine_is_a_plain_machine():
    m = described_machine(2, 9.0, 16)
    assert (m.platform, len(m.gpus), m.cpu_count, m.gpus[0].compute_capability) == ("cuda", 2, 16, 9.0)
    assert described_machine(0, None, 4).platform == "cpu"
