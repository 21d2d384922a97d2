"""One result record: what the executor writes is what every reader parses; old files still load."""

from __future__ import annotations

import json

import pytest
from conftest import REPO
from pydantic import ValidationError

from ablation.results import layout
from ablation.results.record import RESULT_SCHEMA, TaskRecord
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
