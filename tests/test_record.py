"""One result record: what the executor writes is what every reader parses; old files still load."""

from __future__ import annotations

import json

import pytest
from helpers import REPO, run_cli
from pydantic import ValidationError
from resultfactory import write_result

from ablation.results import layout
from ablation.results.record import RESULT_SCHEMA, UPGRADES, TaskRecord
from ablation.results.store import load_results

KEPT = sorted(layout.result_files(REPO / "docs" / "measurements"))


def test_kept_evidence_loads_through_the_record_unchanged():
    """Results written by earlier versions (the H200 runs kept as evidence) parse, and a
    round trip keeps every field they had, with the same value."""
    assert len(KEPT) >= 4, KEPT
    for path in KEPT:
        data = json.loads(path.read_text())
        rec = TaskRecord.model_validate(data)
        again = rec.as_json()
        assert {k: again[k] for k in data} == data, path
        assert rec.schema_ == RESULT_SCHEMA
    rs = load_results([REPO / "docs" / "measurements"])
    assert not [w for w in rs.warnings if "malformed" in w or "not valid JSON" in w], rs.warnings
    stacks = {r.leg: r.record.stack for r in rs.results if r.record.stack}
    assert stacks["0.26-h200"].packages["vllm"] == "0.26.0"


def test_unknown_fields_survive_and_missing_ones_are_named(tmp_path):
    good = json.loads(KEPT[0].read_text())
    rec = TaskRecord.model_validate({**good, "from_a_later_schema": {"x": 1}})
    assert rec.as_json()["from_a_later_schema"] == {"x": 1}
    broken = {k: v for k, v in good.items() if k != "scenario_table"}
    with pytest.raises(ValidationError):
        TaskRecord.model_validate(broken)
    (tmp_path / "results.json").write_text(json.dumps(broken))
    rs = load_results([tmp_path])
    assert rs.results == [] and "'scenario_table': Field required" in rs.warnings[0], rs.warnings
    (tmp_path / "results.json").write_text(json.dumps({**good, "status": "MAYBE"}))
    assert "'status'" in load_results([tmp_path]).warnings[0]


def test_every_kept_results_file_loads_with_no_warning_at_all():
    """The golden files: every results.json kept under docs/measurements is a known schema version
    (results.record.UPGRADES) and a usable record."""
    rs = load_results([REPO / "docs" / "measurements"])
    assert rs.warnings == [] and rs.invalid == [] and len(rs.results) == len(KEPT)
    assert {json.loads(p.read_text())["schema"] for p in KEPT} <= set(UPGRADES)


# Values a results.json can hold that are not measurements (issue 25, item 4): each must be named
# (file and field), counted as invalid in coverage, and never reach a ratio.
BAD_VALUES = [float("nan"), float("inf"), 0.0, -384.6, True, "fast", 1e308]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=repr)
def test_a_value_that_is_not_a_measurement_is_invalid_never_a_ratio(tmp_path, bad):
    run = tmp_path / "r"
    for leg, v in (("0.28-cpu", 100.0), ("0.29-cpu", 110.0)):
        write_result(run, leg, "m", {"mixed": v, "single-request": 2.0})
    path = write_result(run, "0.30-cpu", "m", {"mixed": 120.0, "single-request": 2.0})
    data = json.loads(path.read_text())
    data["workloads"]["mixed"]["value"] = bad
    path.write_text(json.dumps(data))  # json writes NaN/Infinity as Python's json reads them back
    for args in (["compare", str(run)], ["compare", str(run), "--format", "json"]):
        proc = run_cli(*args)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert f"warning: {path}: missing or malformed field 'workloads.mixed.value'" in proc.stderr
    md = run_cli("compare", str(run)).stdout
    assert "| 0.30-cpu | 0/1 | — | — | — | m |" in md, md  # coverage: invalid, not passing, not 'not run'
    # the invalid leg has a column and a ratio column, both empty: no number came from the bad file
    assert "| m | 1 | mixed | 100 | 110 | — | 1.10x (1 pass, no verdict) | — |" in md, md
    proc = run_cli("report", str(run), "--out", str(tmp_path / "rep"))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("compare-arch", str(run), str(run), "--names", "A,B")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("change, field", [
    ({"status": "RUNNING"}, "field 'status': RUNNING"),
    ({"leg": "0.28-cpu"}, "differs from its folder 0.29-cpu/m"),
    ({"schema": "vllm-ablation/result/9"}, "field 'schema': unknown schema 'vllm-ablation/result/9'"),
    ({"workloads": {"mixed": {"kind": "throughputish", "value": 1.0}}}, "'workloads.mixed.kind'"),
    ({"model_id": "m | injected\n| row"}, "'model_id'"),  # would break the Markdown tables
    ({"workloads": {"a|b": {"kind": "throughput", "value": 1.0}}}, "'workloads'"),
])
def test_an_inconsistent_record_is_named_and_counted_invalid(tmp_path, change, field):
    run = tmp_path / "r"
    write_result(run, "0.28-cpu", "m", {"mixed": 100.0})
    path = write_result(run, "0.29-cpu", "m", {"mixed": 110.0})
    path.write_text(json.dumps({**json.loads(path.read_text()), **change}))
    rs = load_results([run])
    assert [i.path for i in rs.invalid] == [path] and field in rs.warnings[0], rs.warnings
    assert [r.leg for r in rs.results] == ["0.28-cpu"]


def test_a_duplicate_repeat_is_named_and_not_counted_twice(tmp_path):
    run = tmp_path / "r"
    first = write_result(run, "0.29-cpu", "m", {"mixed": 100.0})
    copy = first.with_name("results.r1a1.json")  # same run, repeat 1, attempt 1, another file name
    copy.write_bytes(first.read_bytes())
    rs = load_results([run, run / "0.29-cpu"])  # overlapping paths: each file read once
    assert len(rs.results) == 1 and [i.path for i in rs.invalid] == [copy]
    assert f"duplicate of {first}" in rs.warnings[0]
