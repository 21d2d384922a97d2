"""A seed report's "Full data" tables as a TSV file (scenarios/seed-h200-full-data.tsv): what the seed
measured for every row, so the report's "Seed rows" table can set the seed's ratio beside ours.

Columns: `kind` (throughput | latency), `model` (as the seed prints it: the id's part after the
'/'), `tp`, `workload` (as printed: a workload's label, else its key), one column per seed leg
(the value, or '—' where the seed has none) and one per comparison of consecutive legs (`26/18`:
the printed ratio `1.53x`, or '—'). Lines starting with '#' are comments. Each printed ratio must
agree with its two values to 2.5% (they are rounded: 0.42 / 0.32 prints as 1.32x), so a
transcription typo is caught. Bad input is one `<file>: line N: <why>` error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from ablation.errors import AblationError
from ablation.spec.scenarios import ScenarioTable

NONE = "—"
RATIO = re.compile(r"^(\d+(?:\.\d+)?)x$")
TOLERANCE = 0.025  # printed ratios vs their (rounded) values


@dataclass(frozen=True)
class SeedRowValues:
    kind: str
    model: str  # as printed: the model id's part after '/'
    tp: int
    workload: str
    values: dict[str, float | None]  # seed leg -> value
    ratios: dict[str, float | None]  # comparison label (26/18) -> printed ratio
    printed: dict[str, str]  # seed leg or comparison label -> the cell as the seed prints it


@dataclass
class SeedTable:
    """A findings file's `table`: the seed's scenario table, and the seed's values per row if given."""

    table: ScenarioTable
    values: dict[tuple[str, str, str], SeedRowValues] | None = None  # (kind, printed model, workload) -> row


def _number(text: str, where: str) -> float | None:
    if text == NONE:
        return None
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        raise AblationError(f"{where}: '{text}' is not a number or '{NONE}'") from None
    if not math.isfinite(value) or value <= 0:
        raise AblationError(f"{where}: '{text}' is not a positive number")
    return value


def _ratio(text: str, where: str) -> float | None:
    if text == NONE:
        return None
    m = RATIO.match(text)
    if not m or float(m.group(1)) <= 0:
        raise AblationError(f"{where}: '{text}' is not a ratio like 1.53x or '{NONE}'")
    return float(m.group(1))


def load_seed_values(path: Path, legs: list[str], comparisons: list[tuple[str, str, str]]
                     ) -> dict[tuple[str, str, str], SeedRowValues]:
    """(kind, printed model, workload) -> the seed's row. `legs`: the seed's legs in order;
    `comparisons`: (label, old leg, new leg) per ratio column."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AblationError(f"{path}: cannot read the seed's values ({exc})") from None
    header = ["kind", "model", "tp", "workload", *legs, *(c[0] for c in comparisons)]
    rows: dict[tuple[str, str, str], SeedRowValues] = {}
    seen_header = False
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        where = f"{path}: line {n}"
        if not seen_header:
            if cells != header:
                raise AblationError(f"{where}: the header must be {' | '.join(header)}")
            seen_header = True
            continue
        if len(cells) != len(header):
            raise AblationError(f"{where}: {len(cells)} tab-separated cells, expected {len(header)}")
        kind, model, tp, workload = cells[:4]
        if kind not in ("throughput", "latency"):
            raise AblationError(f"{where}: kind '{kind}' is not throughput or latency")
        if not tp.isdigit() or int(tp) < 1:
            raise AblationError(f"{where}: tp '{tp}' is not a positive integer")
        values = {leg: _number(c, f"{where}: {leg}") for leg, c in zip(legs, cells[4:4 + len(legs)])}
        ratios = {c[0]: _ratio(t, f"{where}: {c[0]}") for c, t in zip(comparisons, cells[4 + len(legs):])}
        for label, old, new in comparisons:
            a, b, r = values[old], values[new], ratios[label]
            if r is None or a is None or b is None:
                continue
            implied = b / a if kind == "throughput" else a / b
            if abs(math.log(implied / r)) > math.log1p(TOLERANCE):
                raise AblationError(f"{where}: {label} {r}x disagrees with its values ({a:g} -> {b:g} gives "
                                    f"{implied:.3f}); check the transcription")
        key = (kind, model, workload)
        if key in rows:
            raise AblationError(f"{where}: a second row for {model} {workload} ({kind})")
        printed = dict(zip([*legs, *(c[0] for c in comparisons)], cells[4:]))
        rows[key] = SeedRowValues(kind, model, int(tp), workload, values, ratios, printed)
    if not seen_header:
        raise AblationError(f"{path}: no header line ({' | '.join(header)})")
    return rows
