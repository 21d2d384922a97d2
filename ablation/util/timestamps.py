"""UTC timestamps, in the three spellings the tool writes. One place, so no two files differ."""

from __future__ import annotations

import time

_FORMATS = {
    "iso": "%Y-%m-%dT%H:%M:%SZ",  # in JSON/YAML records (manifests, locks, CANONICAL.yaml)
    "id": "%Y%m%d-%H%M%S",  # run ids and bisect directories: sortable, path-safe
    "human": "%Y-%m-%d %H:%M UTC",  # in reports
}


def utc_stamp(style: str = "iso", when: float | None = None) -> str:
    """`when` (seconds since the epoch, default now) as UTC in one of the styles above."""
    return time.strftime(_FORMATS[style], time.gmtime(when))
