"""`ablation report --seed-findings`: the seed's findings beside what our results measured.

Real result records (tests/resultfactory.py), the real CLI in a subprocess, the real findings file
where it fits (scenarios/seed-findings-h200.yaml)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from helpers import REPO, one_line_error, run_cli
from resultfactory import write_result

FINDINGS = REPO / "scenarios" / "seed-findings-h200.yaml"
LLAMA, OMNI, QWEN2VL = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-Omni-7B", "Qwen/Qwen2-VL-7B-Instruct"
MAMBA, GEMMA = "state-spaces/mamba-2.8b-hf", "google/gemma-4-26B-A4B-it"
HARNESS = {"schema": "vllm-ablation/harness/1"}
VIDEO = {"num_requests": 200, "num_seqs": 200,
         "media": {"type": "video", "sizes": {"frames": 32, "width": 224, "height": 224, "fps": 2.0}}}
H200 = {"gpus": [{"name": "NVIDIA H200", "uuid": "GPU-1"}]}


def tables(md: str) -> dict[str, list[dict[str, str]]]:
    """REPORT.md's tables by their heading (`### title`), each row as {column: cell}."""
    out, title, head = {}, None, None
    for line in md.splitlines():
        if line.startswith("#"):
            title, head = line.lstrip("#").strip(), None
        elif line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if head is None:
                head = cells
                out[title] = []
            else:
                out[title].append(dict(zip(head, cells)))
    return out


def report(tmp_path: Path, *paths: Path, findings: Path = FINDINGS, extra: tuple = ()) -> tuple[str, Path]:
    out = tmp_path / "rep"
    proc = run_cli("report", *map(str, paths), "--seed-findings", str(findings), "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    return (out / "REPORT.md").read_text(), out


def seed_row(md: str, model: str, comparison: str) -> dict[str, str]:
    rows = [r for r in tables(md)["Seed findings: ratios"] if r["model"] == model and r["comparison"] == comparison]
    assert len(rows) == 1, rows
    return rows[0]


def video_run(root: Path, old: list[float], new: list[float], legs=("0.26-h200", "0.29-h200")) -> Path:
    """Qwen2-VL video on two legs, repeats interleaved, as the kept H200 run recorded it."""
    for leg, values in zip(legs, (old, new)):
        for i, v in enumerate(values, 1):
            write_result(root, leg, QWEN2VL, {"video": v}, repeat=i, machine=H200, spec={"load_format": "dummy"},
                         workload_extra=VIDEO, harness=HARNESS)
    return root


def test_repeated_finding_gets_the_compare_tables_own_cell_with_its_arrow_and_the_data_differences(tmp_path):
    run = video_run(tmp_path / "video", [1000, 1012, 990], [1200, 1190, 1215])
    md, out = report(tmp_path, run)
    row = seed_row(md, QWEN2VL, "29/26")
    compare_cell = next(r["29/26"] for r in tables(md)["Throughput (tok/s, higher is better)"]
                        if r["model"] == QWEN2VL)
    assert "↑ [" in compare_cell  # a measured change, with its interval
    assert row["ours"] == f"{compare_cell}; 1,000 → 1,200 tok/s"
    assert row["seed"] == "1.14x (1,674 → 1,905 tok/s, 1 pass)"
    assert row["finding"] == "SSM and audio gains" and row["workload"] == "video"
    # records without `caches` (before 2026-12-05) say so rather than pass for warm or cold
    assert row["our samples"] == "0.26-h200: 3 (3 not recorded), 0.29-h200: 3 (3 not recorded)"
    assert row["differences in data"] == ("dummy weights; synthetic video (32 frames 224x224); "
                                          "synthetic token-id prompts; 200 requests (seed: 1,000)")
    # the same table in every artefact
    data = json.loads((out / "report.json").read_text())["tables"]["seed-ratios"]["rows"]
    cell = next(d for d in data if d["model_id"] == QWEN2VL)
    assert cell["estimate"]["verdict"] == "faster" and cell["values"]["0.29-h200"] == [1200, 1190, 1215]
    assert cell["holm_family"] == "this group's compare tables"
    with (out / "tables" / "seed-ratios.csv").open() as fh:
        assert any(r["ours"] == row["ours"] for r in csv.DictReader(fh))
    assert "<td>" + row["ours"] + "</td>" in (out / "index.html").read_text()


def test_a_pair_that_is_no_column_of_the_compare_tables_says_which_holm_family_judged_it(tmp_path):
    run = video_run(tmp_path / "video", [1000, 1012, 990], [1200, 1190, 1215])
    for i in (1, 2, 3):
        write_result(run, "0.18-h200", QWEN2VL, {"video": 1000}, repeat=i, machine=H200)
    md, _ = report(tmp_path, run, extra=("--baseline", "0.18-h200"))
    row = seed_row(md, QWEN2VL, "29/26")
    assert row["ours"].startswith("1.20x ↑ [")
    assert row["ours"].endswith("; Holm family: 0.26-h200 and 0.29-h200 alone (not a column of the compare tables)")


def test_a_single_pass_finding_has_its_ratio_and_no_verdict(tmp_path):
    run = tmp_path / "llama"
    for leg, v in (("0.18-h200", 109.0), ("0.26-h200", 167.0)):
        write_result(run, leg, LLAMA, {"long-context": v, "mixed": 12000.0}, machine=H200,
                     spec={"load_format": "dummy"}, workload_extra={"num_requests": 64}, harness=HARNESS,
                     caches={"files": 0, "bytes": 0, "carried": None})
    md, _ = report(tmp_path, run)
    row = seed_row(md, LLAMA, "26/18")
    assert row["ours"] == "1.53x (1 pass, no verdict); 109 → 167 tok/s"
    assert row["seed"] == "1.53x (109 → 167 tok/s, 1 pass)"
    assert row["our samples"] == "0.18-h200: 1 (1 cold), 0.26-h200: 1 (1 cold)"  # a fresh machine: both cold
    assert row["differences in data"] == "dummy weights; synthetic token-id prompts"  # 64 requests, as the seed


def test_missing_legs_models_and_failures_are_rows_that_say_why(tmp_path):
    run = tmp_path / "mixed"
    write_result(run, "0.26-h200", OMNI, {"audio": 4000.0}, machine=H200)  # no 0.18-h200, no 0.29-h200 leg
    write_result(run, "0.18-h200", MAMBA, {}, status="FAIL", machine=H200,
                 cause={"class": "runtime-crash", "signature": "RuntimeError: selective_scan failed"})
    write_result(run, "0.26-h200", MAMBA, {"mixed": 8700.0}, machine=H200)
    md, _ = report(tmp_path, run)
    ratios = tables(md)["Seed findings: ratios"]
    assert len(ratios) == 7  # every finding has its row, measured or not
    assert seed_row(md, OMNI, "29/26")["ours"] == "not measured: leg 0.29-h200 not in the results"
    assert seed_row(md, OMNI, "26/18")["ours"] == f"not measured: no result for {OMNI} on 0.18-h200"
    assert seed_row(md, LLAMA, "26/18")["ours"] == f"not measured: {LLAMA} not in the results"
    mamba = seed_row(md, MAMBA, "26/18")
    assert mamba["ours"] == "not measured: FAIL on 0.18-h200 (runtime-crash: RuntimeError: selective_scan failed)"
    assert mamba["our samples"] == "0.18-h200: FAIL, 0.26-h200: 1"


def test_legs_in_different_groups_are_not_a_ratio(tmp_path):
    write_result(tmp_path / "a", "0.18-h200", LLAMA, {"long-context": 109.0}, machine=H200, sha="table-a")
    write_result(tmp_path / "b", "0.26-h200", LLAMA, {"long-context": 167.0}, machine=H200, sha="table-b")
    md, _ = report(tmp_path, tmp_path / "a", tmp_path / "b")
    assert seed_row(md, LLAMA, "26/18")["ours"].startswith(
        "not measured: 0.18-h200 and 0.26-h200 ran meta-llama/Llama-3.1-8B-Instruct in different groups")
    # a group that ran both legs gives the ratio, and names itself when the report has several groups
    for leg, v in (("0.18-h200", 100.0), ("0.26-h200", 150.0)):
        write_result(tmp_path / "c", leg, LLAMA, {"long-context": v}, sha="table-c",
                     machine={"gpus": [{"name": "NVIDIA H200", "uuid": "GPU-2"}]})  # a second H200
    md, _ = report(tmp_path, tmp_path / "a", tmp_path / "b", tmp_path / "c")
    assert seed_row(md, LLAMA, "26/18")["ours"] == (
        "1.50x (1 pass, no verdict); 100 → 150 tok/s; group NVIDIA H200 [2] · table t")


def test_a_group_whose_table_never_asked_for_the_findings_workload_is_no_row_of_it(tmp_path):
    # session 15: Qwen2-VL's other workloads ran in another table on an H100; the video finding
    # gained a second row "not measured" for that group, beside the H200 group that measured it
    video = video_run(tmp_path / "video", [1000, 1012, 990], [1200, 1190, 1215])
    rest = tmp_path / "rest"
    for leg, v in (("0.26-h200", 20000.0), ("0.29-h200", 19500.0)):
        write_result(rest, leg, QWEN2VL, {"text-only": v, "single-video": 6.9}, sha="table-rest",
                     machine={"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9"}]})
    md, _ = report(tmp_path, video, rest)
    assert seed_row(md, QWEN2VL, "29/26")["ours"].startswith("1.20x ↑ [")  # one row: the group that asked
    # no group asked for video: one row that says so, not "ran in different groups"
    md, _ = report(tmp_path, rest)
    assert seed_row(md, QWEN2VL, "29/26")["ours"] == (
        f"not measured: no scenario table that ran {QWEN2VL} on 0.26-h200 and 0.29-h200 lists workload video")


def gemma_runs(root: Path, base_signature: str) -> list[Path]:
    """The seed's gemma-4 story as runs record it: 0.18 FAIL; 0.26 FAIL in its base venv (an
    earlier run); 0.26 PASS in the override variant (a later run, so canonical selection keeps it)."""
    write_result(root / "gemma-base", "0.18-h200", GEMMA, {}, status="FAIL", machine=H200, started_at=100,
                 cause={"class": "unsupported-model", "signature": "ValueError: The checkpoint you are trying to "
                        "load has model type `gemma4` but Transformers does not recognize this architecture"})
    write_result(root / "gemma-base", "0.26-h200", GEMMA, {}, status="FAIL", machine=H200, started_at=100,
                 cause={"class": "runtime-crash", "signature": base_signature})
    write_result(root / "gemma-variant", "0.26-h200", GEMMA, {"mixed": 8100.0}, machine=H200, started_at=200,
                 variant="gemma4-tf5.14.1", spec={"load_format": "dummy"}, harness=HARNESS,
                 workload_extra={"num_requests": 200})
    return [root / "gemma-base", root / "gemma-variant"]


def test_gemma_expected_outcomes_are_matched_per_leg_and_variant(tmp_path):
    md, _ = report(tmp_path, *gemma_runs(tmp_path, "AmbiguousGlobalPerLayerAttributeError: 'head_dim' is a "
                                                   "per-layer attribute and may vary across layers"))
    rows = {(r["leg"], r["variant"]): r for r in tables(md)["Seed findings: expected outcomes"]}
    assert list(rows) == [("0.18 → 0.18-h200", "base"), ("0.26 → 0.26-h200", "base"),
                          ("0.26 → 0.26-h200", "gemma4-tf5.14.1"), ("0.29 → 0.29-h200", "base")]
    # the seed's 0.29 PASS (transformers 5.17.0, no pin) is expected too; these runs hold no 0.29 result
    assert rows[("0.29 → 0.29-h200", "base")]["matches"] == "not observed"
    r18 = rows[("0.18 → 0.18-h200", "base")]
    assert r18["observed"].startswith("FAIL: unsupported-model: ValueError: The checkpoint")
    assert r18["expected"] == "FAIL, signature contains 'model type'" and r18["matches"] == "yes"
    r26 = rows[("0.26 → 0.26-h200", "base")]
    assert r26["matches"] == "yes"
    # the base venv's run is another environment than the tables' run (the variant's PASS): named as such
    assert r26["observed"].endswith(
        "(run gemma-base: another environment than the tables' run; in coverage and failure attribution)")
    variant = rows[("0.26 → 0.26-h200", "gemma4-tf5.14.1")]
    assert variant["observed"] == "PASS, mixed 8,100 tok/s (1 pass)" and variant["matches"] == "yes"
    assert variant["expected"] == "PASS, mixed 8,471"
    assert variant["differences in data"] == ("dummy weights; 0.26-h200 in variant gemma4-tf5.14.1; "
                                              "synthetic token-id prompts; 200 requests (seed: 1,000)")


def test_a_result_on_another_gpu_model_than_the_seeds_says_so_and_one_on_the_seeds_does_not(tmp_path):
    # the findings file names the seed's GPU (NVIDIA H200); the 0.18 outcome here was recorded on an H100
    write_result(tmp_path / "h100", "0.18-h200", GEMMA, {}, status="FAIL", started_at=100,
                 machine={"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-3"}]},
                 cause={"class": "unsupported-model", "signature": "ValueError: The checkpoint you are trying to "
                        "load has model type `gemma4` but Transformers does not recognize this architecture"})
    # the seed's 0.29 PASS, observed on another H100 (session 7's run: 5,417 tok/s mixed, seed 8,955)
    write_result(tmp_path / "h100-029", "0.29-h200", GEMMA, {"mixed": 5417.4}, started_at=300,
                 machine={"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-4"}]},
                 spec={"load_format": "dummy"}, harness=HARNESS, workload_extra={"num_requests": 200})
    write_result(tmp_path / "h200", "0.26-h200", LLAMA, {"long-context": 167.0}, machine=H200)
    write_result(tmp_path / "h200", "0.18-h200", LLAMA, {"long-context": 109.0}, machine=H200)
    md, _ = report(tmp_path, tmp_path / "h100", tmp_path / "h100-029", tmp_path / "h200")
    outcomes = {r["leg"]: r for r in tables(md)["Seed findings: expected outcomes"]}
    r18 = outcomes["0.18 → 0.18-h200"]
    assert r18["matches"] == "yes"
    assert r18["differences in data"] == "0.18-h200 ran on NVIDIA H100 80GB HBM3 (seed: NVIDIA H200)"
    r29 = outcomes["0.29 → 0.29-h200"]
    assert (r29["expected"], r29["observed"], r29["matches"]) == (
        "PASS, mixed 8,955", "PASS, mixed 5,420 tok/s (1 pass)", "yes")  # 3 significant digits: 1 pass
    assert r29["differences in data"] == ("0.29-h200 ran on NVIDIA H100 80GB HBM3 (seed: NVIDIA H200); dummy weights; "
                                          "synthetic token-id prompts; 200 requests (seed: 1,000)")
    # the same GPU model as the seed's: no such line (the request count is the one other difference here)
    assert seed_row(md, LLAMA, "26/18")["differences in data"] == "request count not recorded (seed: 64)"


def test_a_leg_that_ran_on_the_seeds_gpu_and_on_another_says_how_many_of_its_processes_did(tmp_path):
    # mamba-2.8b on 0.26: one pass on an H100 (session 8), one on an H200 (session 10); no 0.18 result.
    # "0.26-h200 ran on NVIDIA H100" alone would say that no 0.26 process ran on the seed's GPU.
    H100 = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-6"}]}
    write_result(tmp_path / "h100", "0.26-h200", MAMBA, {"mixed": 5052.0}, machine=H100)
    write_result(tmp_path / "h200", "0.26-h200", MAMBA, {"mixed": 5220.0}, machine=H200)
    md, _ = report(tmp_path, tmp_path / "h100", tmp_path / "h200")
    assert seed_row(md, MAMBA, "26/18")["differences in data"] == (
        "0.26-h200: 1 of 2 processes ran on NVIDIA H100 80GB HBM3 (seed: NVIDIA H200); "
        "request count not recorded (seed: 1,000)")
    md, _ = report(tmp_path, tmp_path / "h100")  # every process of the leg on the H100: said without a count
    assert seed_row(md, MAMBA, "26/18")["differences in data"].startswith(
        "0.26-h200 ran on NVIDIA H100 80GB HBM3 (seed: NVIDIA H200); ")


def test_coverage_and_failure_attribution_show_the_base_venv_failure_beside_the_variant_pass(tmp_path):
    # The gemma-4 story: 0.26 FAILs in its base venv and PASSes in the override variant. The
    # variant's run is the one the tables use; the base venv's FAIL is an outcome of its own (another
    # environment), not a superseded attempt, so coverage and failure attribution show it, labelled.
    sig = "AmbiguousGlobalPerLayerAttributeError: 'head_dim' is a per-layer attribute"
    runs = gemma_runs(tmp_path, sig)
    # an older variant attempt that failed is superseded (same environment): it stays out
    write_result(tmp_path / "gemma-variant-old", "0.26-h200", GEMMA, {}, status="FAIL", machine=H200, started_at=150,
                 variant="gemma4-tf5.14.1", cause={"class": "runtime-crash", "signature": "OSError: feature extractor"})
    md, out = report(tmp_path, *runs, tmp_path / "gemma-variant-old")
    t = tables(md)
    coverage = {r["leg"]: r for r in t["Coverage"]}
    assert list(coverage) == ["0.18-h200", "0.26-h200", "0.26-h200 (base venv)"]
    assert coverage["0.26-h200"]["passing"] == "1/1"
    assert coverage["0.26-h200 (base venv)"]["passing"] == "0/1" and coverage["0.26-h200 (base venv)"]["failed"] == GEMMA
    failures = [(r["leg"], r["class"], r["signature"]) for r in t["Failure attribution"]]
    assert failures == [("0.18-h200", "unsupported-model", failures[0][2]),
                        ("0.26-h200 (base venv)", "runtime-crash", sig)]
    assert "OSError" not in md.split("## Seed vs this tool")[0].split("## Warnings")[0]
    assert "0.26-h200/google/gemma-4-26B-A4B-it in base venv (run gemma-base)" in md  # the warning says so too


def test_another_environment_s_values_never_reach_a_value_or_ratio_cell(tmp_path):
    # both environments passed: the tables' cell is the chosen run's value alone, never the two
    # pooled as repeats; the base venv's pass shows only as its coverage row
    write_result(tmp_path / "base", "0.26-h200", GEMMA, {"mixed": 5000.0}, machine=H200, started_at=100)
    write_result(tmp_path / "variant", "0.26-h200", GEMMA, {"mixed": 8100.0}, machine=H200, started_at=200,
                 variant="gemma4-tf5.14.1")
    md, out = report(tmp_path, tmp_path / "base", tmp_path / "variant")
    t = tables(md)
    throughput = next(rows for title, rows in t.items() if title.startswith("Throughput"))
    assert [(r["model"], r["0.26-h200"]) for r in throughput] == [(GEMMA, "8,100")]
    assert "5,000" not in md and "5000" not in (out / "report.json").read_text()
    coverage = {r["leg"]: r["passing"] for r in t["Coverage"]}
    assert coverage == {"0.26-h200": "1/1", "0.26-h200 (base venv)": "1/1"}


def test_an_outcome_unlike_the_seeds_is_a_mismatch_and_an_absent_one_is_not_observed(tmp_path):
    base, _ = gemma_runs(tmp_path, "torch.OutOfMemoryError: CUDA out of memory")
    md, _ = report(tmp_path, base)  # the variant's run is not given
    rows = {(r["leg"], r["variant"]): r for r in tables(md)["Seed findings: expected outcomes"]}
    assert rows[("0.26 → 0.26-h200", "base")]["matches"] == (
        "no: the signature does not contain 'AmbiguousGlobalPerLayerAttributeError'")
    assert rows[("0.26 → 0.26-h200", "gemma4-tf5.14.1")]["matches"] == "not observed"
    assert rows[("0.26 → 0.26-h200", "gemma4-tf5.14.1")]["observed"] == (
        f"not observed: no result for {GEMMA} on 0.26-h200 in variant gemma4-tf5.14.1")


def test_without_the_option_the_report_is_the_same_and_the_option_only_adds_its_section(tmp_path):
    runs = [video_run(tmp_path / "video", [1000, 1012, 990], [1200, 1190, 1215]), *gemma_runs(tmp_path, "x")]
    plain = tmp_path / "plain"
    assert run_cli("report", *map(str, runs), "--out", str(plain)).returncode == 0
    md, out = report(tmp_path, *runs)
    without = re.sub(r"^Generated .*$", "", (plain / "REPORT.md").read_text(), flags=re.M)
    section = re.search(r"^## Seed vs this tool\n.*?(?=^## Known limitations)", md, flags=re.M | re.S)
    covered = re.search(r"^\d+\. Of the seed's table, these results cover only part: .*\n", md, flags=re.M)
    assert section and covered  # the section, and its one line under Known limitations
    rest = md.replace(section.group(0), "").replace(covered.group(0), "")
    assert re.sub(r"^Generated .*$", "", rest, flags=re.M) == without
    assert "Seed" not in without
    assert sorted(p.name for p in (out / "tables").iterdir()) == sorted(
        [p.name for p in (plain / "tables").iterdir()]
        + ["seed-coverage.csv", "seed-outcomes.csv", "seed-ratios.csv", "seed-rows-summary.csv", "seed-rows.csv"])


MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
H100 = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5"}]}


def test_every_row_of_the_seed_table_says_what_the_results_hold_of_it_for_each_comparison(tmp_path):
    # the findings file names the seed's table (scenarios/seed.yaml, GLM-5.2 left out): 62 rows, 41 at tp 1
    video_run(tmp_path / "video", [1000, 1012, 990], [1200, 1190, 1215])  # 29/26, 3 processes per leg
    for leg, v in (("0.18-h200", 109.0), ("0.26-h200", 167.0)):  # 26/18, one process per leg; no 0.29
        write_result(tmp_path / "llama", leg, LLAMA, {"mixed": 9000.0, "long-context": v}, machine=H200)
    write_result(tmp_path / "gemma", "0.18-h200", GEMMA, {}, status="FAIL", machine=H200,
                 cause={"class": "unsupported-model", "signature": "ValueError: model type `gemma4`"})
    write_result(tmp_path / "mixtral", "0.26-h200", MIXTRAL, {}, status="SKIP", machine=H200, tp=2,
                 skip_reason="needs 2 GPUs for tensor-parallel size 2, this machine has 1")
    write_result(tmp_path / "omni-h200", "0.26-h200", OMNI, {"audio": 2760.0}, machine=H200, sha="omni-a")
    write_result(tmp_path / "omni-h100", "0.29-h200", OMNI, {"audio": 2200.0}, machine=H100, sha="omni-b")
    md, out = report(tmp_path, *(tmp_path / d for d in ("video", "llama", "gemma", "mixtral", "omni-h200",
                                                       "omni-h100")))
    t = tables(md)
    rows = t["Seed rows: per row"]
    assert len(rows) == 62 and (rows[0]["model"], rows[0]["workload"]) == (LLAMA, "mixed")
    assert not any(r["model"] == "nvidia/GLM-5.2-NVFP4" for r in rows)
    assert (rows[-1]["model"], rows[-1]["workload"]) == (GEMMA, "fixed-batch-32")
    row = {(r["model"], r["workload"]): r for r in rows}
    compare_cell = next(r["29/26"] for r in t["Throughput (tok/s, higher is better) · NVIDIA H200, t table-sh"]
                        if r["model"] == QWEN2VL)
    assert list(rows[0]) == ["model", "workload", "kind", "tp", "26/18 seed", "26/18 ours", "29/26 seed", "29/26 ours"]
    assert row[(QWEN2VL, "video")]["29/26 ours"] == f"{compare_cell} · NVIDIA H200 · table t"  # the compare tables' own
    assert row[(QWEN2VL, "video")]["29/26 seed"] == "1.14x (1,674 → 1,905)"  # the seed's Full data, as printed
    assert row[(QWEN2VL, "video")]["26/18 ours"] == "0.18-h200: not run · 0.26-h200: 3 passes on NVIDIA H200"
    # a PASS that holds another workload of the model is no value for this row
    assert row[(QWEN2VL, "image")]["29/26 ours"] == "0.26-h200: not run · 0.29-h200: not run"
    assert row[(LLAMA, "long-context")]["26/18 ours"] == "1.53x (1 pass, no verdict) · NVIDIA H200 · table t"
    assert row[(LLAMA, "long-context")]["26/18 seed"] == "1.53x (109 → 167)"
    assert row[(LLAMA, "long-context")]["29/26 ours"] == "0.26-h200: 1 pass on NVIDIA H200 · 0.29-h200: not run"
    assert row[(LLAMA, "single-request")]["26/18 ours"] == "0.18-h200: not run · 0.26-h200: not run"
    assert row[(LLAMA, "single-request")]["26/18 seed"] == "1.01x (5.10 → 5.02)"  # latency: a speedup, as printed
    assert row[(GEMMA, "mixed")]["26/18 ours"] == "0.18-h200: FAIL (unsupported-model) · 0.26-h200: not run"
    assert row[(GEMMA, "mixed")]["26/18 seed"] == "— (— → 8,471)"  # the seed has no 0.18 value either
    assert row[(MIXTRAL, "mixed")]["tp"] == "2"
    assert row[(MIXTRAL, "mixed")]["26/18 ours"] == (
        "0.18-h200: not run · 0.26-h200: SKIP (needs 2 GPUs for tensor-parallel size 2, this machine has 1)")
    assert row[(OMNI, "audio")]["29/26 ours"] == (
        "0.26-h200: 1 pass on NVIDIA H200 · 0.29-h200: 1 pass on NVIDIA H100 80GB HBM3: no group (scenario table x "
        "machine) holds both, so no ratio")
    summary = {(r["comparison"], r["rows"]): r for r in t["Seed rows: measured per comparison"]}
    assert list(summary) == [("26/18 (0.18-h200 → 0.26-h200)", "tp 1"), ("26/18 (0.18-h200 → 0.26-h200)", "tp > 1"),
                             ("29/26 (0.26-h200 → 0.29-h200)", "tp 1"), ("29/26 (0.26-h200 → 0.29-h200)", "tp > 1")]
    counts = {k: [int(v) for c, v in r.items() if c not in ("comparison", "rows")] for k, r in summary.items()}
    # seed rows | ratio ≥ 3 | ratio < 3 | FAIL or SKIP | both legs, no common group | one leg only | not run
    assert counts[("26/18 (0.18-h200 → 0.26-h200)", "tp 1")] == [41, 0, 2, 4, 0, 2, 33]
    assert counts[("26/18 (0.18-h200 → 0.26-h200)", "tp > 1")] == [21, 0, 0, 4, 0, 0, 17]
    assert counts[("29/26 (0.26-h200 → 0.29-h200)", "tp 1")] == [41, 1, 0, 0, 1, 2, 37]
    assert counts[("29/26 (0.26-h200 → 0.29-h200)", "tp > 1")] == [21, 0, 0, 4, 0, 0, 17]
    assert "Left out of the seed's rows: nvidia/GLM-5.2-NVFP4: not in the H200 report" in md
    coverage = {r["leg"]: r for r in t["Seed coverage: models per leg"]}
    assert list(coverage) == ["0.18 → 0.18-h200", "0.26 → 0.26-h200", "0.29 → 0.29-h200"]
    assert coverage["0.18 → 0.18-h200"]["passing"] == "1/14"  # Llama
    assert coverage["0.18 → 0.18-h200"]["failed"] == "gemma-4-26B-A4B-it (unsupported-model)"
    # Mixtral skipped on 0.26 (tp 2 on one GPU): not failed, and out of the denominator, as in the seed's table
    assert coverage["0.26 → 0.26-h200"]["passing"] == "3/13"  # Llama, Qwen2-VL, Omni
    assert coverage["0.26 → 0.26-h200"]["skipped"] == (
        "Mixtral-8x7B-Instruct-v0.1 (needs 2 GPUs for tensor-parallel size 2, this machine has 1)")
    assert coverage["0.29 → 0.29-h200"]["passing"] == "2/14"  # Qwen2-VL, Omni
    assert "mamba-2.8b-hf" in coverage["0.29 → 0.29-h200"]["not run"]
    limits = md.split("## Known limitations", 1)[1].split("##", 1)[0]
    assert ("Of the seed's table, these results cover only part: 26/18: 2 of 62 with a ratio, 0 of them from 3 or "
            "more processes per leg; 29/26: 1 of 62 with a ratio, 1 of them from 3 or more processes per leg.") in limits
    # the same table in every artefact
    data = json.loads((out / "report.json").read_text())["tables"]
    video = next(d for d in data["seed-rows"]["rows"] if d["model_id"] == QWEN2VL and d["workload"] == "video")
    assert video["comparisons"]["29/26"]["cells"][0]["estimate"]["verdict"] == "faster"
    assert video["comparisons"]["29/26"]["category"] == "ratio, ≥ 3 processes per leg"
    assert video["comparisons"]["29/26"]["seed"] == {"ratio": 1.14, "values": {"0.26": 1674.0, "0.29": 1905.0}}
    with (out / "tables" / "seed-rows.csv").open() as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == 62


def test_the_findings_ratios_and_the_seeds_full_data_agree():
    # two transcriptions of one report (the findings' ratios, the Full data TSV): a typo in either shows here
    from ablation.report.seedrows import load_seed_table, seed_comparisons
    from ablation.spec.findings import load_findings

    fs = load_findings(FINDINGS)
    values = load_seed_table(fs, FINDINGS).values
    labels = {(a, b): label for label, a, b in seed_comparisons(fs)}
    for f in fs.ratios:
        v = values[(f.kind, f.model.split("/", 1)[1], f.workload)]
        assert v.ratios[labels[(f.baseline, f.candidate)]] == f.seed.ratio, f
        assert (v.values[f.baseline], v.values[f.candidate]) == (f.seed.baseline, f.seed.candidate), f
    for o in fs.outcomes:
        for e in o.expect:
            if e.value is not None:
                assert values[("throughput", o.model.split("/", 1)[1], e.workload)].values[e.leg] == e.value


TSV = REPO / "scenarios" / "seed-h200-full-data.tsv"


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("\t109\t167\t167\t1.53x", "\t109\t167\t167\t1.35x", 1),
     "26/18 1.35x disagrees with its values (109 -> 167 gives 1.532)"),
    (lambda t: t.replace("\t109\t167\t167\t1.53x", "\t109\t1 67\t167\t1.53x", 1), "'1 67' is not a number"),
    (lambda t: t.replace("throughput\tmamba-2.8b-hf\t1\tmixed", "throughput\tmamba-2.8b-hf\t2\tmixed", 1),
     "mamba-2.8b-hf mixed: tp 2, the table has 1"),
    (lambda t: "\n".join(ln for ln in t.splitlines() if "\twhisper-large-v3\t1\tlibrispeech" not in ln) + "\n",
     "no values for 1 row(s)"),
    (lambda t: t.replace("throughput\tLlama-3.1-8B-Instruct\t1\tmixed", "throughput\tLlama-3.1-8B-Instruct\t1\tmixd", 1),
     "Llama-3.1-8B-Instruct mixd (throughput) is no row of"),
    (lambda t: t.replace("\t26/18\t29/26", "\t18→26\t26→29", 1), "the header must be"),
    (lambda t: t.replace("\t1.53x\t1.00x", "\t1.53\t1.00x", 1), "'1.53' is not a ratio like 1.53x"),
])
def test_a_bad_seed_values_file_is_one_error_line_naming_the_file(tmp_path, edit, message):
    write_result(tmp_path / "run", "0.26-h200", LLAMA, {"mixed": 1.0})
    findings = tmp_path / "findings.yaml"
    findings.write_text(FINDINGS.read_text().replace("path: seed.yaml", f"path: {REPO / 'scenarios' / 'seed.yaml'}", 1))
    text = edit(TSV.read_text())
    assert text != TSV.read_text()
    (tmp_path / "seed-h200-full-data.tsv").write_text(text)
    line = one_line_error(run_cli("report", str(tmp_path / "run"), "--seed-findings", str(findings),
                                  "--out", str(tmp_path / "rep")))
    assert line.startswith(f"error: {tmp_path / 'seed-h200-full-data.tsv'}") and message in line, line
    assert not (tmp_path / "rep").exists()


GOOD = FINDINGS.read_text()


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace("ratio: 1.53,", "ratio: 1.53x,", 1), "ratios.0.seed.ratio"),
    (lambda t: t.replace("workload: long-context\n", "workload: long-context\n    colour: red\n", 1),
     "ratios.0.colour': unknown field"),
    (lambda t: t.replace("    workload: long-context\n", "    workload: long-context\n    workload: mixed\n", 1),
     "duplicate key 'workload'"),
    (lambda t: t.replace('baseline: "0.18"', 'baseline: "0.17"', 1), "ratios.0.baseline: leg '0.17'"),
    (lambda t: t.replace("ratio: 1.53,", "ratio: 1.35,", 1), "seed.ratio 1.35 disagrees with its values"),
    (lambda t: t.replace("        cause: model type\n", "", 1), "outcomes.0.expect.0': Value error, an expected FAIL"),
    (lambda t: t.replace("gpu: NVIDIA H200\n", "gpu: NVIDIA | H200\n", 1), "field 'gpu': Value error, must be one printable"),
    # the seed's table is named relative to the findings file: none beside this copy
    (lambda t: t, "field 'table.path': no scenario table at "),
    (lambda t: t.replace("path: seed.yaml", f"path: {REPO / 'scenarios' / 'seed.yaml'}", 1).replace(
        "nvidia/GLM-5.2-NVFP4:", "nvidia/GLM-5.3-NVFP4:", 1),
     "field 'table.leave_out': model 'nvidia/GLM-5.3-NVFP4' is not in "),
    (lambda t: t.replace("  path: seed.yaml\n", "", 1), "field 'table.path': Field required"),
    (lambda t: t.replace("path: seed.yaml", f"path: {REPO / 'scenarios' / 'seed.yaml'}", 1),
     "field 'table.values': no file at "),
])
def test_a_bad_findings_file_is_one_error_line_naming_the_file_and_field(tmp_path, edit, field):
    write_result(tmp_path / "run", "0.26-h200", LLAMA, {"mixed": 1.0})
    bad = tmp_path / "findings.yaml"
    text = edit(GOOD)
    bad.write_text(text)
    line = one_line_error(run_cli("report", str(tmp_path / "run"), "--seed-findings", str(bad),
                                  "--out", str(tmp_path / "rep")))
    assert line.startswith(f"error: {bad}: ") and field in line, line
    assert not (tmp_path / "rep").exists()  # refused before any work
