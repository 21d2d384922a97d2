"""The cold-start disclosure: which processes began with their leg's compile and JIT caches empty,
and how far their values sat from the warm ones (ablation.analysis.coldstart)."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli
from resultfactory import write_result

from ablation.analysis.coldstart import cold_start_table
from ablation.results.store import load_results

REPO = Path(__file__).resolve().parents[1]
OMNI = REPO / "docs/measurements/2026-12-07-session12-h100-omni-audio/results"
COLD = {"files": 0, "bytes": 0, "carried": None}
WARM = {"files": 515, "bytes": 38_355_096, "carried": None}
CARRIED = {"files": 515, "bytes": 38_355_096, "carried": {"packed_on": {"hostname": "gpu-a"}}}


def test_the_kept_h100_omni_run_shows_its_slow_cold_process_on_029():
    """Real records (4 processes per leg on one H100): 0.29-h200's cold process was 9% slower than
    its warm ones (2,456 vs a 2,698 tok/s median), 0.26-h200's within 1%."""
    table = cold_start_table(load_results([OMNI]))
    assert table.columns == ["model", "workload", "0.26-h200", "0.29-h200"]
    assert table.rows == [["Qwen/Qwen2.5-Omni-7B", "audio", "1 cold, 3 warm (cold/warm 1.00x; warm max/min 1.03)",
                           "1 cold, 3 warm (cold/warm 0.91x; warm max/min 1.03)"]]
    per = table.data[0]["legs"]["0.29-h200"]
    assert per["counts"] == {"cold": 1, "warm": 3} and abs(per["cold_over_warm_speed"] - 2456.5 / 2698.6) < 1e-3


def test_compare_and_report_print_it_in_every_group(tmp_path):
    out = run_cli("compare", str(OMNI))
    assert out.returncode == 0, out.stderr
    assert "### Cold and warm processes" in out.stdout and "1 cold, 3 warm (cold/warm 0.91x; warm max/min 1.03)" in out.stdout
    rep = run_cli("report", str(OMNI), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr
    md = (tmp_path / "rep" / "REPORT.md").read_text()
    assert "### Cold and warm processes" in md and "(cold/warm 0.91x; warm max/min 1.03)" in md
    assert "(cold/warm 0.91x; warm max/min 1.03)" in (tmp_path / "rep" / "tables" / "cold_starts.csv").read_text()


def test_latency_is_inverted_and_carried_and_unrecorded_caches_are_named(tmp_path):
    run = tmp_path / "r"
    # leg a: a cold process at 2x the warm ms/tok (half the speed) and 0.8x the warm tok/s
    write_result(run, "a", "m", {"mixed": 80.0, "single-request": 10.0}, repeat=1, caches=COLD)
    write_result(run, "a", "m", {"mixed": 100.0, "single-request": 5.0}, repeat=2, caches=WARM)
    write_result(run, "a", "m", {"mixed": 100.0, "single-request": 5.0}, repeat=3, caches=WARM)
    # leg b: caches carried from another machine, then one record from before caches were recorded
    write_result(run, "b", "m", {"mixed": 100.0, "single-request": 5.0}, repeat=1, caches=CARRIED)
    write_result(run, "b", "m", {"mixed": 100.0, "single-request": 5.0}, repeat=2)
    # a FAIL is no process with values: not counted
    write_result(run, "b", "m", {"mixed": 1.0}, repeat=3, status="FAIL", caches=COLD,
                 cause={"cls": "crash", "signature": "boom"})
    table = cold_start_table(load_results([run]))
    assert table.rows == [["m", "mixed", "1 cold, 2 warm (cold/warm 0.80x; warm max/min 1.00)",
                           "1 carried, 1 not recorded"],
                          ["m", "single-request", "1 cold, 2 warm (cold/warm 0.50x; warm max/min 1.00)",
                           "1 carried, 1 not recorded"]]


def test_a_single_pass_on_a_fresh_machine_says_both_values_are_cold(tmp_path):
    run = tmp_path / "r"
    write_result(run, "a", "m", {"mixed": 100.0}, caches=COLD)
    write_result(run, "b", "m", {"mixed": 110.0}, caches=COLD)
    assert cold_start_table(load_results([run])).rows == [["m", "mixed", "1 cold", "1 cold"]]
