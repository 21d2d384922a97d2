"""The disclosure a reader needs when some task started from caches carried from another machine."""

from __future__ import annotations

from ablation.errors import one_line
from ablation.results.store import ResultSet


def carried_caches_note(rs: ResultSet) -> str | None:
    """One sentence naming the legs and the machines the caches came from; None when no task's
    record says it started from carried caches (envs.caches, the record's `caches.carried`)."""
    carried = [r for r in rs.results if r.record.caches and r.record.caches.carried]
    if not carried:
        return None
    envs = sorted({r.leg if not r.variant else f"{r.leg}+{r.variant}" for r in carried})
    sources = sorted({_source(r.record.caches.carried) for r in carried})
    return one_line(f"{len(carried)} of {len(rs.results)} task attempts ({', '.join(envs)}) started from compile and JIT "
            f"caches carried from another machine ({'; '.join(sources)}), so their engine start-up was not a cold "
            "one, and their timed work may differ from a cold process's as a warm one's does (see Cold and warm "
            "processes; docs/air-gapped-gpu.md).", 2000)


def _source(origin: dict) -> str:
    on = origin.get("packed_on") if isinstance(origin.get("packed_on"), dict) else {}
    gpus = on.get("gpus") if isinstance(on.get("gpus"), list) else []
    return f"packed on {on.get('hostname', '?')} ({', '.join(map(str, gpus)) or 'no GPU'}) at {origin.get('packed_at', '?')}"
