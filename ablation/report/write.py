"""`ablation report`: REPORT.md, tables/*.csv, report.json, index.html and plots/, all from results."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ablation.analysis.groups import group_results
from ablation.errors import AblationError
from ablation.report.document import ReportInput, bridged_tables, build_tables, report_markdown
from ablation.report.html import report_html
from ablation.report.plots import make_plots
from ablation.report.seedcheck import seed_tables
from ablation.report.seedrows import row_tables

__all__ = ["ReportInput", "write_report", "MARKER"]

MARKER = "ABLATION_REPORT.json"  # lists every file the last report wrote: the only ones it replaces
# What a report written before the marker existed holds (recognised by its report.json).
_LEGACY = re.compile(r"(REPORT\.md|index\.html|report\.json|tables/[^/]+\.csv|plots/[^/]+\.png)")


def _own_files(out_dir: Path) -> list[Path]:
    """The files a previous report wrote into out_dir (to be replaced); refuses a directory the
    tool did not write, so a hand-written file there is never overwritten or deleted."""
    if out_dir.exists() and not out_dir.is_dir():
        raise AblationError(f"--out: {out_dir} is a file; give a directory for the report")
    if not out_dir.is_dir():
        return []
    marker = out_dir / MARKER
    if marker.is_file():
        try:
            listed = json.loads(marker.read_text())["files"]
            assert isinstance(listed, list) and all(isinstance(f, str) for f in listed)
        except (ValueError, KeyError, TypeError, AssertionError, UnicodeDecodeError):
            raise AblationError(f"{marker}: not a list of the files a report wrote; remove {out_dir} or give "
                                "another --out (nothing was changed)") from None
        return [out_dir / f for f in listed if _LEGACY.fullmatch(f)]
    present = sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if not p.is_dir())
    if not present:
        return []
    if _is_legacy_report(out_dir):
        return [out_dir / f for f in present if _LEGACY.fullmatch(f)]
    raise AblationError(f"--out: {out_dir} is not empty and holds no {MARKER}, so `ablation report` did not "
                        "write it; give a new or empty directory (nothing was changed)")


def _is_legacy_report(out_dir: Path) -> bool:
    """A report directory written before the marker: its report.json has the report's own keys."""
    try:
        data = json.loads((out_dir / "report.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"warnings", "legs", "tables"} <= set(data)


def write_report(inp: ReportInput, out_dir: Path) -> list[Path]:
    previous = _own_files(out_dir)
    try:
        for path in previous:  # stale tables of an earlier report go; nothing else in out_dir is touched
            if path.is_symlink() or path.is_file():
                path.unlink()  # a link itself, never what it points to
        written = _write(inp, out_dir)
    except OSError as exc:
        raise AblationError(f"--out: {out_dir}: cannot write the report ({exc.strerror or exc})") from None
    (out_dir / MARKER).write_text(json.dumps(
        {"generator": "ablation report", "files": sorted(p.relative_to(out_dir).as_posix() for p in written)},
        indent=2) + "\n")
    return written


def _write(inp: ReportInput, out_dir: Path) -> list[Path]:
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    (out_dir / "plots").mkdir(exist_ok=True)
    groups = group_results(inp.rs)
    gts = build_tables(inp, groups)
    bridged = bridged_tables(inp, groups)
    seed = seed_tables(inp.seed, groups, inp.rs, inp.legs, inp.baseline) if inp.seed else {}
    if inp.seed:
        seed.update(row_tables(inp.seed, groups, inp.rs, inp.legs, inp.baseline))
    md = report_markdown(inp, gts, bridged, list(seed.values()))
    written = [out_dir / "REPORT.md"]
    (out_dir / "REPORT.md").write_text(md)
    named = {(f"{gt.tag}-{name}" if gt.tag else name): t for gt in gts for name, t in gt.tables.items()}
    named.update({f"bridged-{kind}": t for kind, t in zip(("throughput", "latency"), bridged)})
    named.update(seed)
    for name, t in named.items():
        (out_dir / "tables" / f"{name}.csv").write_text(t.csv())
        written.append(out_dir / "tables" / f"{name}.csv")
    (out_dir / "report.json").write_text(json.dumps(
        {"warnings": inp.rs.warnings, "legs": inp.legs, "scenario_sha256": sorted(inp.rs.scenario_hashes()),
         "groups": [{"tag": gt.tag, "machine": gt.group.key.machine, "scenario_sha256": gt.group.key.scenario_sha256,
                     "legs": gt.legs} for gt in gts],
         "tables": {k: {"title": t.title, "columns": t.columns, "rows": t.data} for k, t in named.items()}},
        indent=2, default=str))
    written.append(out_dir / "report.json")
    plots = make_plots(inp, gts, out_dir)
    title = md.splitlines()[0].lstrip("# ")
    (out_dir / "index.html").write_text(report_html(title, md, plots))
    written += [out_dir / "index.html"] + [out_dir / p for p, _ in plots]
    return written
