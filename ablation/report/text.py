"""`ablation compare`'s output: every group's tables as Markdown, CSV or JSON."""

from __future__ import annotations

import json

from ablation.analysis.carried import carried_caches_note
from ablation.analysis.groups import bridge_table, group_results
from ablation.analysis.tables import Table
from ablation.results.store import ResultSet


def render(rs: ResultSet, fmt: str, legs: list[str] | None = None, baseline: str | None = None,
           bridge: str | None = None) -> str:
    """One section per (scenario table, machine) group: ratio columns never cross a group.
    `bridge`: add the ratios chained through that leg across machines, labelled as such."""
    groups = group_results(rs)
    sections = [(g, g.tables(legs, baseline)[1]) for g in groups]
    bridged = [bridge_table(groups, bridge, kind) for kind in ("throughput", "latency")] if bridge else []
    carried = carried_caches_note(rs)
    if fmt == "json":
        return json.dumps({"warnings": rs.warnings, "carried_caches": carried, "scenario_sha256": sorted(rs.scenario_hashes()),
                           "groups": [{"machine": g.key.machine, "scenario_sha256": g.key.scenario_sha256,
                                       "scenario_name": g.key.scenario_name, "legs": g.legs(legs),
                                       "tables": [_json_table(t) for t in tables]} for g, tables in sections],
                           **({"tables": [_json_table(t) for t in sections[0][1]]} if len(sections) == 1 else {}),
                           "bridged": [_json_table(t) for t in bridged]}, indent=2, default=str)
    if fmt == "csv":
        return "\n".join(f"# {_prefix(g, len(sections))}{t.title}\n{t.csv()}" for g, tables in sections for t in tables) \
            + "".join(f"\n# {t.title}\n{t.csv()}" for t in bridged)
    hashes = sorted(rs.scenario_hashes())
    header = f"Scenario table sha256: {', '.join(h[:12] for h in hashes) or 'none'}\n"
    if len(sections) > 1:
        header += (f"{len(sections)} groups (scenario table x machine): {'; '.join(g.label for g, _ in sections)}. "
                   "Ratio columns exist only within a group; across machines use `ablation compare-arch`, "
                   "or `--bridge LEG` for ratios chained through a leg both machines ran.\n")
    warn = "".join(f"WARNING: {w}\n" for w in rs.warnings) + (f"Note: {carried}\n" if carried else "")
    body = []
    for g, tables in sections:
        if len(sections) > 1:
            body.append(f"## {g.label}\n")
        body += [t.markdown(suffix=f" · {g.key.machine}" if len(sections) > 1 else "") for t in tables]
    body += [t.markdown() for t in bridged]
    return header + warn + "\n" + "\n".join(body)


def _prefix(group, n_groups: int) -> str:
    return f"{group.label}: " if n_groups > 1 else ""


def _json_table(t: Table) -> dict:
    return {"title": t.title, "columns": t.columns, "rows": t.data}
