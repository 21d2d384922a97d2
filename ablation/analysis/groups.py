"""Results split by (scenario table, machine): the only sets inside which a ratio means something.

"Machine" is one physical machine, not a model: two H200s of one model drift apart (2.9%
measured on 2026-12-02), so each is its own group once the results hold more than one.

A ratio between two legs is a claim about the legs only when both ran the same table on
the same machine. Across groups the comparer shows side-by-side sections; a cross-machine
number comes only from `compare-arch` or from an explicit bridge through a leg that both
machines ran, printed with that leg's own machine-to-machine ratio beside it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ablation.analysis.coldstart import cold_start_table
from ablation.analysis.tables import Table, all_tables, collect, pair_label, row_order
from ablation.results.machines import machine_instance, machine_of
from ablation.results.store import ResultSet, TaskResult, sort_legs


@dataclass(frozen=True)
class GroupKey:
    scenario_sha256: str
    scenario_name: str
    machine: str


@dataclass
class Group:
    key: GroupKey
    rs: ResultSet

    @property
    def label(self) -> str:
        return f"{self.key.machine} · table {self.key.scenario_name} ({self.key.scenario_sha256[:12]})"

    def legs(self, order: list[str] | None = None) -> list[str]:
        mine = set(self.rs.legs())
        return [leg for leg in order if leg in mine] if order else self.rs.legs()

    def tables(self, order: list[str] | None, baseline: str | None) -> tuple[list[str], list[Table]]:
        """This group's legs (in `order`), its all_tables and its cold-start table; a baseline it lacks
        is ignored here."""
        legs = self.legs(order)
        if not legs:
            return legs, []
        return legs, all_tables(self.rs, legs, baseline if baseline in legs else None) + [cold_start_table(self.rs, legs)]


def group_results(rs: ResultSet) -> list[Group]:
    """Groups in the order their first result appears; each keeps only its own results and
    shares the whole set's warnings (an unreadable file cannot be placed in a group)."""
    # Two machines of one model (two lent H200s) are two groups: a ratio must not pool a leg's
    # runs from both. Their names then carry the instance, so every heading tells them apart.
    instances: dict[str, set] = {}
    for r in rs.results:
        instances.setdefault(machine_of(r), set()).add(machine_instance(r.record.machine))
    groups: dict[GroupKey, list[TaskResult]] = {}
    cell_group: dict[tuple, GroupKey] = {}  # (leg, model, machine instance) -> its chosen run's group
    for r in rs.results:
        machine = machine_of(r)
        if len(instances[machine]) > 1:
            machine += f" [{machine_instance(r.record.machine) or 'instance not recorded'}]"
        key = GroupKey(r.scenario_sha256, r.record.scenario_table.name, machine)
        groups.setdefault(key, []).append(r)
        cell_group[(r.leg, r.model_id, machine_instance(r.record.machine))] = key
    # An outcome in another environment goes beside the chosen run of its (leg, model, machine):
    # it is read against that cell (the same leg and model on the same machine), whatever its table.
    others: dict[GroupKey, list[TaskResult]] = {}
    for r in rs.others:
        key = cell_group.get((r.leg, r.model_id, machine_instance(r.record.machine)))
        if key is not None:
            others.setdefault(key, []).append(r)
    return [Group(k, ResultSet(v, rs.warnings, rs.invalid, others.get(k, []))) for k, v in groups.items()]


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def bridge_table(groups: list[Group], bridge: str, kind: str) -> Table:
    """Ratios between a leg only one machine ran and a leg only the other ran, chained through
    `bridge` (a leg both ran on the same table): new/old = (new/bridge on B) x (bridge/old on A).
    Beside each, the bridge leg's own ratio between the two machines (the new leg's over the old
    leg's): how much the machines differ on identical software, the uncertainty the chain inherits."""
    higher_better = kind == "throughput"
    unit = "tok/s" if higher_better else "ms/tok"
    table = Table(f"Bridged {kind} ratios through {bridge} (cross-machine: NOT measured side by side)",
                  ["model", "tp", "workload", "ratio", "bridged value", f"{bridge} itself, new leg's machine / old leg's"], [])
    with_bridge = [g for g in groups if bridge in g.rs.legs()]
    for i, a in enumerate(with_bridge):
        for b in with_bridge[i + 1:]:
            if a.key.scenario_sha256 != b.key.scenario_sha256:
                continue  # different tables: even a bridge cannot make their workloads the same
            ca, cb = collect(a.rs, kind), collect(b.rs, kind)
            order = row_order(ResultSet(a.rs.results + b.rs.results, []))
            only_a = [x for x in a.rs.legs() if x not in b.rs.legs()]
            only_b = [y for y in b.rs.legs() if y not in a.rs.legs()]
            for key in sorted(set(ca) & set(cb), key=lambda k: order[k]):
                for x in only_a:
                    for y in only_b:
                        # Old and new by version, whichever machine each ran on (group order is
                        # only the order the results were read in).
                        old, new = sort_legs([x, y])
                        (g_old, c_old), (g_new, c_new) = ((a, ca), (b, cb)) if old == x else ((b, cb), (a, ca))
                        v_old, v_new = _median(c_old[key].get(old)), _median(c_new[key].get(new))
                        br_old, br_new = _median(c_old[key].get(bridge)), _median(c_new[key].get(bridge))
                        if None in (v_old, v_new, br_old, br_new):
                            continue
                        # > 1: the new leg's machine is faster on identical software (the bridge leg)
                        drift = br_new / br_old if higher_better else br_old / br_new
                        ratio = ((v_new / br_new) / (v_old / br_old) if higher_better
                                 else (v_old / br_old) / (v_new / br_new))
                        label = pair_label(old, new, [old, new], kind)
                        table.rows.append([key.model_id, str(key.tp), key.workload, label,
                                           f"{ratio:.2f}x (bridged via {bridge}; {old} on {g_old.key.machine}, "
                                           f"{new} on {g_new.key.machine})", f"{drift:.3f}x"])
                        table.data.append({"model_id": key.model_id, "tp": key.tp, "workload": key.workload,
                                           "unit": unit, "old": old, "new": new, "bridge": bridge, "ratio": ratio,
                                           "bridge_machine_ratio": drift, "machine_old": g_old.key.machine,
                                           "machine_new": g_new.key.machine})
    table.note = (f"Not a side-by-side measurement: each ratio multiplies a ratio measured on one machine by one "
                  f"measured on the other, linked by {bridge}. The last column is {bridge}'s own ratio between "
                  "the machines (identical software): a chained ratio is uncertain by at least that much. "
                  "Single passes get no verdict." if table.rows else
                  f"No row: no two machines ran {bridge} on the same scenario table with a leg the other lacks.")
    return table
