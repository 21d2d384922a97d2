"""The report's figures: one ratio figure per group, and the cross-architecture scatter."""

from __future__ import annotations

from pathlib import Path

from ablation.analysis.crossarch import speedup_table
from ablation.report.document import GroupTables, ReportInput


def _ratio_panel(ax, rows: list[dict], cols: list[str], colours: dict[str, str], title: str) -> list[float]:
    """One workload's ratio bars, drawn from 1.00; returns every value and interval end drawn
    (the figure's shared, symmetric axis is set from them)."""
    width = 0.8 / max(1, len(cols))
    drawn: list[float] = []
    for j, col in enumerate(cols):
        for i, row in enumerate(rows):
            est = row["ratios"].get(col)
            if not est:
                continue
            x, y, lo, hi = i + j * width, est["ratio"], est["low"], est["high"]
            measured = lo is not None and hi is not None
            # unrepeated: hatched, and no interval, because none was measured
            ax.bar([x], [y - 1.0], width, bottom=1.0, color=colours[col], hatch=None if measured else "//",
                   edgecolor="black", linewidth=0.5)
            if measured:
                ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], color="black", capsize=3, linewidth=0.8)
            # the value as text: a 1.00x bar has no height, and a reader should not measure pixels
            ax.annotate(f"{y:.2f}x", (x, hi if measured and y >= 1 else lo if measured else y),
                        xytext=(0, 3 if y >= 1 else -3), textcoords="offset points", ha="center",
                        va="bottom" if y >= 1 else "top", fontsize=7)
            drawn += [y] + ([lo, hi] if measured else [])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(cols) - 1) / 2 for i in range(len(rows))])
    ax.set_xticklabels([r["model_id"] for r in rows], rotation=20 if len(rows) > 1 else 0,
                       ha="right" if len(rows) > 1 else "center", fontsize=7)
    ax.set_title(title, fontsize=9)
    return drawn


def _cols_with_data(rows: list[dict]) -> set[str]:
    """The ratio columns with an estimate in any of these rows (only they get bars and legend entries)."""
    return {col for row in rows for col, est in row["ratios"].items() if est}


def _group_ratio_figure(plt, panels: dict[str, list[tuple[str, list[dict]]]], title: str, path: Path) -> bool:
    """One figure per group: a column per metric (throughput, latency), a panel per workload; every
    panel on one log axis symmetric about 1.00 (a 2x gain and a 2x loss look alike, and panels
    compare at a glance); legend entries only for ratio columns that have data."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    kinds = [k for k, ws in panels.items() if any(_cols_with_data(rows) for _, rows in ws)]
    if not kinds:
        return False
    nrows = max(len(panels[k]) for k in kinds)
    n_models = max(len(rows) for k in kinds for _, rows in panels[k])
    cols_by_kind = {k: list(panels[k][0][1][0]["ratios"]) for k in kinds}
    n_cols = max(len(c) for c in cols_by_kind.values())
    fig, axes = plt.subplots(nrows, len(kinds), squeeze=False, sharey=True,
                             figsize=(max(4.0, 0.6 * n_models * n_cols + 1.5) * len(kinds), 2.3 * nrows + 0.9))
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # an axis of at least +-10%: a 1.01x bar reads as small, not as a full-height change
    extreme, legend, used = 1.10, {}, 0
    for c, kind in enumerate(kinds):
        cols = cols_by_kind[kind]
        colours = {col: palette[(used + j) % len(palette)] for j, col in enumerate(cols)}
        used += len(cols)
        for r in range(nrows):
            ax = axes[r][c]
            if r >= len(panels[kind]):
                ax.set_visible(False)
                continue
            workload, rows = panels[kind][r]
            drawn = _ratio_panel(ax, rows, cols, colours, f"{workload} ({kind})")
            extreme = max([extreme] + [max(v, 1 / v) for v in drawn if v and v > 0])
            for col in sorted(_cols_with_data(rows), key=cols.index):
                legend.setdefault((kind, col), Patch(facecolor=colours[col], edgecolor="black",
                                                     label=f"{col} ({kind})"))
    top = extreme * 1.2  # room for the value printed above the tallest bar
    for ax in axes.flat:
        ax.set_yscale("log")
        ax.set_ylim(1 / top, top)
        ax.yaxis.set_major_locator(FixedLocator(sorted({1 / extreme, extreme ** -0.5, 1.0, extreme ** 0.5, extreme})))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.2f}x"))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_formatter(NullFormatter())
    for r in range(nrows):
        axes[r][0].set_ylabel("speedup (x, log)", fontsize=8)
    fig.suptitle(f"{title}\nratio per workload (1.00x = same; hatched: 1 pass, no interval measured)", fontsize=9)
    fig.legend(handles=list(legend.values()), loc="lower center", ncol=len(legend), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def make_plots(inp: ReportInput, gts: list[GroupTables], out_dir: Path) -> list[tuple[str, str]]:
    """(file, caption) per plot: one ratio figure per group, and the cross-architecture scatter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for gt in gts:
        panels: dict[str, list[tuple[str, list[dict]]]] = {}
        for kind in ("throughput", "latency"):
            by_workload: dict[str, list[dict]] = {}
            for row in gt.tables[kind].data:
                by_workload.setdefault(row["workload"], []).append(row)
            if by_workload:
                panels[kind] = list(by_workload.items())
        name = f"plots/{gt.tag}-ratios.png" if gt.tag else "plots/ratios.png"
        if panels and _group_ratio_figure(plt, panels, gt.group.label, out_dir / name):
            made.append((name, f"Ratios · {gt.group.label}"))
    if "cross_arch" in gts[0].tables:
        full = speedup_table(inp.rs, inp.other, inp.names, inp.threshold, flagged_only=False)
        if full.data:
            fig, ax = plt.subplots(figsize=(4.5, 4.5))
            xs = [d[inp.names[1]] for d in full.data]
            ys = [d[inp.names[0]] for d in full.data]
            flagged = [d["divergence"] > inp.threshold for d in full.data]
            ax.scatter(xs, ys, c=["tab:red" if f else "tab:blue" for f in flagged], s=18)
            lim = [min(xs + ys) * 0.9, max(xs + ys) * 1.1]
            ax.plot(lim, lim, color="black", linewidth=0.8)
            ax.plot(lim, [v * inp.threshold for v in lim], "--", color="grey", linewidth=0.6)
            ax.plot(lim, [v / inp.threshold for v in lim], "--", color="grey", linewidth=0.6)
            ax.set_xlabel(f"speedup on {inp.names[1]}")
            ax.set_ylabel(f"speedup on {inp.names[0]}")
            ax.set_title(f"cross-architecture (red: > {inp.threshold:.2f}x apart)")
            fig.tight_layout()
            fig.savefig(out_dir / "plots/cross-arch.png", dpi=110)
            plt.close(fig)
            made.append(("plots/cross-arch.png", f"Cross-architecture speedups: {inp.names[0]} vs {inp.names[1]}"))
    return made
