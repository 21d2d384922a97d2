"""Ratio tables from hand-made results with known answers (some taken from the seed report)."""

from __future__ import annotations

import json

import pytest
from helpers import one_line_error, run_cli
from resultfactory import write_result

from ablation.analysis.tables import leg_label, ratio_table
from ablation.report.text import render
from ablation.results.store import load_results

LEGS = ("0.18", "0.26", "0.29")
# shared/seeds/h200-vllm-ablation-report.txt: per-leg numbers and the ratios printed beside them.
# Per-leg numbers as printed (strings: their last digit is the rounding that bounds each ratio).
SEED_THROUGHPUT = {
    ("Llama-3.1-8B-Instruct", "long-context"): (("109", "167", "167"), ("1.53x", "1.00x")),
    ("Qwen3-VL-235B-A22B-Instruct-FP8", "image"): (("6539", "4614", "5400"), ("0.71x", "1.17x")),
    ("Mamba-Codestral-7B-v0.1", "mixed"): (("4368", "7209", "7649"), ("1.65x", "1.06x")),
}
SEED_LATENCY = {
    ("gpt-oss-120b", "single-request"): (("5.30", "3.97", "4.12"), ("1.33x", "0.96x")),
    ("Mamba-Codestral-7B-v0.1", "fixed-batch-32"): (("0.42", "0.32", "0.32"), ("1.32x", "1.01x")),
}


def seed_results(tmp_path):
    run = tmp_path / "seed"
    per_task: dict[tuple[str, str], dict[str, float]] = {}  # one results.json per (leg, model)
    for table in (SEED_THROUGHPUT, SEED_LATENCY):
        for (model, workload), (values, _) in table.items():
            for leg, v in zip(LEGS, values):
                per_task.setdefault((leg, model), {})[workload] = float(v)
    for (leg, model), values in per_task.items():
        write_result(run, leg, model, values)
    return run


def ratios(row, n=2):
    """The ratio numbers of a row (the cells before the trailing 'controls' column)."""
    return tuple(cell.split()[0] for cell in row[-1 - n:-1])


def half_unit(printed: str) -> float:
    """Half a unit of the last printed digit: how far the unrounded number can be from it."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return 0.5 * 10 ** -decimals


def ratio_bounds(old: str, new: str, higher_is_better: bool) -> tuple[float, float]:
    """The range a ratio of two printed numbers can take, given their rounding, widened by the
    half unit of a two-decimal printed ratio."""
    a, b = (float(old), float(new)) if higher_is_better else (float(new), float(old))
    ha, hb = half_unit(old if higher_is_better else new), half_unit(new if higher_is_better else old)
    return (b - hb) / (a + ha) - 0.005, (b + hb) / (a - ha) + 0.005


def close(got: tuple[str, ...], published: tuple[str, ...], values: tuple[str, ...], higher_is_better: bool) -> bool:
    """Per cell: the seed computed its ratios from unrounded numbers, so the seed's printed ratio and
    ours (from its rounded per-leg values) must both lie within what that rounding allows, no wider
    (5.30/3.97 prints 1.34x, the seed 1.33x; both fit [1.327, 1.343])."""
    for i, (g, p) in enumerate(zip(got, published)):
        lo, hi = ratio_bounds(values[i], values[i + 1], higher_is_better)
        if not (lo <= float(g.rstrip("x")) <= hi and lo <= float(p.rstrip("x")) <= hi):
            return False
    return True


def rows_by_key(table):
    return {(r[0], r[2]): r for r in table.rows}


def test_seed_ratios_rederived_from_per_leg_numbers(tmp_path):
    rs = load_results([seed_results(tmp_path)])
    thr = ratio_table(rs, "throughput")
    assert thr.columns[-3:] == ["26/18", "29/26", "controls"]
    for key, (values, published) in SEED_THROUGHPUT.items():
        assert close(ratios(rows_by_key(thr)[key]), published, values, True), key
    lat = ratio_table(rs, "latency")
    assert lat.columns[-3:] == ["18→26", "26→29", "controls"]
    for key, (values, published) in SEED_LATENCY.items():
        assert close(ratios(rows_by_key(lat)[key]), published, values, False), key
    # the tolerance is per cell and tight: a mistranscribed ratio fails where rounding is fine
    assert not close(("1.65x", "1.07x"), ("1.65x", "1.07x"), ("4368", "7209", "7649"), True)
    llama = rows_by_key(thr)[("Llama-3.1-8B-Instruct", "long-context")]
    assert llama[-3:-1] == ["1.53x (1 pass, no verdict)", "1.00x (1 pass, no verdict)"]  # one process per leg: a 53% lead is still no verdict
    assert ratios(rows_by_key(lat)[("gpt-oss-120b", "single-request")]) == ("1.34x", "0.96x")
    # one pass = 5% noise: three significant digits, not five
    assert rows_by_key(thr)[("Qwen3-VL-235B-A22B-Instruct-FP8", "image")][3:6] == ["6,540", "4,610", "5,400"]
    assert "no between-process dispersion was measured and no ratio gets a verdict" in thr.note


def test_baseline_compares_every_leg_to_one(tmp_path):
    rs = load_results([seed_results(tmp_path)])
    thr = ratio_table(rs, "throughput", baseline="0.18")
    assert thr.columns[-3:] == ["26/18", "29/18", "controls"]
    assert ratios(rows_by_key(thr)[("Qwen3-VL-235B-A22B-Instruct-FP8", "image")]) == ("0.71x", "0.83x")


def test_missing_leg_gives_dash_not_a_ratio(tmp_path):
    run = tmp_path / "r"
    write_result(run, "0.26", "gemma-4", {"mixed": 8471})
    write_result(run, "0.29", "gemma-4", {"mixed": 8955})
    write_result(run, "0.18", "gemma-4", {}, status="FAIL",
                 cause={"class": "unsupported-model", "signature": "ValidationError: model type `gemma4`"})
    write_result(run, "0.18", "llama", {"mixed": 100})
    rs = load_results([run])
    row = rows_by_key(ratio_table(rs, "throughput"))[("gemma-4", "mixed")]
    assert row[3] == "—" and row[6] == "—" and row[7] == "1.06x (1 pass, no verdict)"
    md = render(rs, "md")
    assert "| 0.18 | 1/2 | gemma-4 | — | — |" in md
    assert "| 0.18 | gemma-4 | unsupported-model | ValidationError: model type `gemma4` |" in md


def test_repeats_use_the_median_and_latest_attempt(tmp_path):
    run = tmp_path / "r"
    for rep, v in enumerate([100, 110, 105, 108], 1):
        write_result(run, "0.28-cpu", "m", {"mixed": v}, repeat=rep)
    for rep, v in enumerate([200, 210, 190, 205], 1):
        write_result(run, "0.29-cpu", "m", {"mixed": v}, repeat=rep)
    # A later attempt of 0.29-cpu repeat 1 failed: that repeat no longer counts -> median of 210, 190, 205
    write_result(run, "0.29-cpu", "m", {"mixed": 999}, repeat=1, attempt=2, status="FAIL")
    rs = load_results([run])
    table = ratio_table(rs, "throughput")
    row = table.rows[0]
    assert row[4] == "205" and row[3] == "106"
    assert row[5].startswith("1.9x ↑ [1.7, ")  # geometric means 201.5 / 105.7; excludes 1 but is >20% wide
    assert table.data[0]["ratios"]["29/28"]["method"] == "welch-log"
    assert "Welch's t-test on log values" in table.note and "Holm" in table.note
    assert leg_label("0.29-cpu", ["0.28-cpu", "0.29-cpu"]) == "29"
    assert leg_label("0.29", ["0.29", "0.29-cpu"]) == "0.29"


def test_controls_flag_unequal_kv_cache_next_to_the_ratio(tmp_path):
    run = tmp_path / "r"
    write_result(run, "0.28-cpu", "m", {"mixed": 100}, engine={"kv_cache_tokens": 1000, "attention_backend": "X"})
    write_result(run, "0.29-cpu", "m", {"mixed": 120}, engine={"kv_cache_tokens": 2000, "attention_backend": "X"})
    md = render(load_results([run]), "md")
    assert "| m | 1 | mixed | 100 | 120 | 1.20x (1 pass, no verdict) | differ: kv-cache |" in md
    assert "**DIFFERS**: 0.28-cpu 1,000 / 0.29-cpu 2,000" in md and "same (X)" in md


@pytest.mark.parametrize(("work", "cell", "detail"), [
    # 10 sequences of 150 prompt + 50 output tokens: 2,000 tokens at once, more than the smaller cache
    ({"total_input_tokens": 1500, "total_output_tokens": 500, "num_seqs": 10}, "differ: kv-cache (binds)",
     "; **binds**: the workload holds up to 2,000 tokens at once"),
    ({"total_input_tokens": 600, "total_output_tokens": 400, "num_seqs": 10}, "differ: kv-cache (not binding)",
     "; not binding: the workload holds at most 1,000 tokens at once"),
    # vLLM counted the media's tokens in the prompt (placeholders expanded): they are held in the cache
    ({"total_input_tokens": 100, "engine_prompt_tokens": 1500, "total_output_tokens": 400, "media": {"type": "image"}},
     "differ: kv-cache (binds)", "; **binds**: the workload holds up to 1,900 tokens at once"),
    # media whose tokens vLLM's prompt count does not hold (whisper's encoder): what the cache holds is unknown
    ({"total_input_tokens": 100, "engine_prompt_tokens": 100, "total_output_tokens": 400, "media": {"type": "audio"}},
     "differ: kv-cache", ""),
])
def test_a_kv_cache_that_differs_says_whether_the_workload_can_fill_the_smaller_one(tmp_path, work, cell, detail):
    run = tmp_path / "r"
    write_result(run, "0.28-cpu", "m", {"mixed": 100}, engine={"kv_cache_tokens": 1000}, workload_extra=work)
    write_result(run, "0.29-cpu", "m", {"mixed": 120}, engine={"kv_cache_tokens": 2000}, workload_extra=work)
    rs = load_results([run])
    md = render(rs, "md")
    assert f"| 1.20x (1 pass, no verdict) | {cell} |" in md
    assert ratio_table(rs, "throughput").data[0]["kv_cache_binding"] == (cell.partition("(")[2].rstrip(")") or None)
    assert f"**DIFFERS**: 0.28-cpu 1,000 / 0.29-cpu 2,000{detail} |" in md


def test_controls_no_leg_reported_is_not_reported_never_same(tmp_path):
    """No leg reporting a control is no evidence of like for like (CPU legs report no attention backend)."""
    run = tmp_path / "r"
    for leg, v in (("0.28-cpu", 100), ("0.29-cpu", 101)):
        write_result(run, leg, "m", {"mixed": v}, engine={"kv_cache_tokens": 1000})
        write_result(run, leg, "n", {"mixed": v})
    md = render(load_results([run]), "md")
    assert "| m | 1 | mixed | 100 | 101 | 1.01x (1 pass, no verdict) | same (work done, attention backend, scheduler not reported) |" in md
    assert "| n | 1 | mixed | 100 | 101 | 1.01x (1 pass, no verdict) | not reported |" in md
    assert "| n | mixed | not reported | not reported | not reported | not reported |" in md
    assert "| m | mixed | not reported | same (1,000) | not reported | not reported |" in md


def test_corrupt_and_partial_files_are_named_never_dropped_silently(tmp_path):
    run = tmp_path / "r"
    write_result(run, "0.28-cpu", "a", {"mixed": 10})
    bad = write_result(run, "0.29-cpu", "a", {"mixed": 12})
    bad.write_text("{truncated")
    partial = write_result(run, "0.29-cpu", "b", {"mixed": 12})
    partial.write_text(json.dumps({"leg": "0.29-cpu"}))
    proc = run_cli("compare", str(run))
    assert proc.returncode == 0
    assert f"warning: {bad}: not valid JSON" in proc.stderr
    assert f"warning: {partial}: missing or malformed field" in proc.stderr
    assert "WARNING:" in proc.stdout and "2 note(s) about unreadable or excluded results" in proc.stdout


def test_mismatched_scenario_tables_are_flagged(tmp_path):
    write_result(tmp_path / "a", "0.28-cpu", "m", {"mixed": 10}, sha="aaaa")
    write_result(tmp_path / "b", "0.29-cpu", "m", {"mixed": 10}, sha="bbbb")
    md = render(load_results([tmp_path / "a", tmp_path / "b"]), "md")
    # two tables: two groups side by side, and no ratio column across them
    assert "2 groups (scenario table x machine)" in md and "Ratio columns exist only within a group" in md
    assert "29/28" not in md and md.count("### Throughput") == 2


def test_results_from_two_machines_never_share_a_ratio_column_unless_bridged(tmp_path):
    """The 26/18 + 29/26 study: 0.18 and 0.26 on one H200, 0.26 and 0.29 on another machine."""
    h1, h2 = {"gpus": [{"name": "NVIDIA H200"}]}, {"gpus": [{"name": "NVIDIA B200"}]}
    for leg, v in (("0.18", 100.0), ("0.26", 150.0)):
        write_result(tmp_path / "m1", leg, "llama", {"mixed": v, "single-request": 10.0}, machine=h1)
    for leg, v in (("0.26", 165.0), ("0.29", 198.0)):
        write_result(tmp_path / "m2", leg, "llama", {"mixed": v, "single-request": 8.0}, machine=h2)
    rs = load_results([tmp_path / "m1", tmp_path / "m2"])
    md = render(rs, "md")
    assert "## NVIDIA H200 · table t" in md and "## NVIDIA B200 · table t" in md
    assert "26/18" in md and "29/26" in md and "29/18" not in md  # within each machine only
    bridged = render(rs, "md", bridge="0.26")
    row = next(ln for ln in bridged.splitlines() if ln.startswith("| llama | 1 | mixed | 29/18"))
    # (198/165) x (150/100) = 1.80; 0.26 itself is 1.10x faster on the second machine
    assert "1.80x (bridged via 0.26; 0.18 on NVIDIA H200, 0.29 on NVIDIA B200)" in row and row.endswith("| 1.100x |")
    lat = next(ln for ln in bridged.splitlines() if ln.startswith("| llama | 1 | single-request | 18→29"))
    assert "1.00x (bridged via 0.26" in lat and lat.endswith("| 1.250x |")  # 10/10 x 8/8; 0.26: 10 -> 8 ms
    assert "NOT measured side by side" in bridged
    data = json.loads(render(rs, "json", bridge="0.26"))
    assert [g["machine"] for g in data["groups"]] == ["NVIDIA H200", "NVIDIA B200"] and "tables" not in data
    assert data["bridged"][0]["rows"][0]["bridge_machine_ratio"] == 165.0 / 150.0


def test_csv_and_json_formats(tmp_path):
    run = seed_results(tmp_path)
    csv_out = run_cli("compare", "--format", "csv", str(run)).stdout
    assert 'Llama-3.1-8B-Instruct,1,long-context,109,167,167,"1.53x (1 pass, no verdict)","1.00x (1 pass, no verdict)",not reported' in csv_out
    data = json.loads(run_cli("compare", "--format", "json", str(run)).stdout)
    thr = next(t for t in data["tables"] if t["title"].startswith("Throughput"))
    row = next(r for r in thr["rows"] if r["model_id"] == "Llama-3.1-8B-Instruct")
    assert abs(row["ratios"]["26/18"]["ratio"] - 167 / 109) < 1e-12


def test_bad_compare_input_is_one_line_error(tmp_path, cli):
    assert "no results.json" in one_line_error(cli("compare", str(tmp_path)))
    run = seed_results(tmp_path)
    assert "--baseline: '0.99'" in one_line_error(cli("compare", str(run), "--baseline", "0.99"))
    assert "--legs: 0.5 not in the results" in one_line_error(cli("compare", str(run), "--legs", "0.18,0.5"))


def test_bridge_through_a_leg_not_in_the_results_is_a_one_line_error(tmp_path):
    write_result(tmp_path / "r", "0.26", "llama", {"mixed": 100.0})
    proc = run_cli("compare", str(tmp_path / "r"), "--bridge", "0.18")
    assert proc.returncode != 0
    assert "--bridge: '0.18' is not a leg in these results (0.26)" in one_line_error(proc)


def test_two_machines_of_one_model_are_two_groups_and_the_bridge_orders_legs_by_version(tmp_path):
    """The real 26/18 + 29/26 study: two lent H200s, both `vm`, told apart by GPU UUID. Read the
    29/26 machine first: the bridged column is still 29/18 (new over old), never 18/29."""
    m_2926 = {"hostname": "vm", "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-766a72fb-07da"}]}
    m_2618 = {"hostname": "vm", "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-4b04f8c3-be5f"}]}
    for leg, v in (("0.26", 165.0), ("0.29", 198.0)):
        write_result(tmp_path / "h200-2926", leg, "llama", {"mixed": v, "single-request": 8.0}, machine=m_2926)
    for leg, v in (("0.18", 100.0), ("0.26", 150.0)):
        write_result(tmp_path / "h200-2618", leg, "llama", {"mixed": v, "single-request": 10.0}, machine=m_2618)
    proc = run_cli("compare", str(tmp_path / "h200-2926"), str(tmp_path / "h200-2618"), "--bridge", "0.26")
    assert proc.returncode == 0, proc.stderr
    # 0.26 ran on both machines: each machine keeps its own run, neither is "excluded"
    assert "no CANONICAL entry" not in proc.stderr
    md = proc.stdout
    assert "## NVIDIA H200 [766a72fb] · table t" in md and "## NVIDIA H200 [4b04f8c3] · table t" in md
    assert "| llama | 1 | mixed | 150 | 165" not in md  # no table pools the two machines' 0.26
    row = next(ln for ln in md.splitlines() if ln.startswith("| llama | 1 | mixed | 29/18"))
    # (198/165) x (150/100) = 1.80; 0.26 is 1.10x faster on the 0.29 leg's machine
    assert "1.80x (bridged via 0.26; 0.18 on NVIDIA H200 [4b04f8c3], 0.29 on NVIDIA H200 [766a72fb])" in row
    assert row.endswith("| 1.100x |") and "18/29" not in md
    lat = next(ln for ln in md.splitlines() if ln.startswith("| llama | 1 | single-request | 18→29"))
    assert "1.00x (bridged via 0.26" in lat and lat.endswith("| 1.250x |")


def test_canonical_choice_is_per_machine(tmp_path):
    """Two runs of one leg on one machine still need a choice; the same leg on another machine
    is not a rival run."""
    a = {"hostname": "vm", "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-aaaaaaaa-1"}]}
    b = {"hostname": "vm", "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-bbbbbbbb-1"}]}
    write_result(tmp_path / "r1", "0.26", "llama", {"mixed": 100.0}, machine=a)
    write_result(tmp_path / "r2", "0.26", "llama", {"mixed": 110.0}, machine=a)
    write_result(tmp_path / "r3", "0.26", "llama", {"mixed": 120.0}, machine=b)
    proc = run_cli("compare", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stderr.splitlines() if "no CANONICAL entry" in ln]
    assert len(notes) == 1 and "0.26/llama on machine aaaaaaaa: 2 runs" in notes[0], proc.stderr
    # machine b's only run is kept, in machine b's own group: its section's row holds 120
    section_b = proc.stdout[proc.stdout.index("[bbbbbbbb]"):]
    assert "| llama | 1 | mixed | 120 |" in section_b, proc.stdout


def test_unequal_repeats_are_stated_per_leg_never_as_the_larger_count(tmp_path):
    """One process on the old leg and two on the new (a run stopped between repeats, as on the
    lent H100 in issue 28): the ratio cell and the footnote say 1 and 2, never '2 processes per leg'
    nor '1 pass' alone; a table with no rows gets no footnote about '0 processes'."""
    run = tmp_path / "r"
    write_result(run, "0.26", "m", {"audio": 100})
    write_result(run, "0.29", "m", {"audio": 104}, repeat=1)
    write_result(run, "0.29", "m", {"audio": 106}, repeat=2)
    rs = load_results([run])
    table = ratio_table(rs, "throughput")
    assert table.rows[0][5] == "1.05x (1 and 2 passes, no verdict)"
    assert table.note.startswith("1-2 processes per leg and cell, fewer than 3: too few to judge")
    latency = ratio_table(rs, "latency")
    assert latency.rows == [] and latency.note == ""
    assert "0 processes" not in render(rs, "md")
