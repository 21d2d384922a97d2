"""Every budget-sized copy of scenarios/seed.yaml (scenarios/h200-*.yaml) differs from it in exactly
the changes it declares, and in nothing else.

Each copy's header says "seed.yaml's, byte for byte in value, except ...": a table that others read
beside the seed's must not drift silently (a changed prompt length, dtype or engine argument would
change the measured number and the seed-vs-tool table would lay it beside the seed's as if like for
like). The comparison is made on the validated tables (defaults filled in), so a field left out
that defaults to another value is a difference too. A new copy must be declared here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO

from ablation.spec.scenarios import load_scenarios

SCENARIOS = REPO / "scenarios"
FEWER = (1000, 200)  # num_prompts: seed -> copy (a device call is 10 minutes, a session 30)
JAMBA, JAMBA_WHY = "ai21labs/AI21-Jamba-Mini-1.7", "52B parameters: about 96 GiB of bf16 weights on one GPU"
SHORTER_TIMEOUT = {("timeout_s",): (1800.0, 900.0)}  # a task that cannot end within one device call fails sooner

# copy -> {path: (seed's value, the copy's value)}: the declared changes, all of them.
DECLARED: dict[str, dict[tuple, tuple]] = {
    "h200-finding-qwen2vl-video.yaml": {
        **SHORTER_TIMEOUT, ("workloads", "video", "num_prompts"): FEWER},
    "h200-finding-omni-audio.yaml": {
        **SHORTER_TIMEOUT, ("workloads", "audio", "num_prompts"): FEWER},
    "h200-omni.yaml": {
        **SHORTER_TIMEOUT, **{("workloads", w, "num_prompts"): FEWER for w in ("text", "image", "video", "audio")}},
    # made from seed.yaml when its gemma-4 entry still had skip_tokenizer_init (before the synthesized
    # gemma-4 tokenizer, 2026-12-05); frozen since, as recorded results carry their sha256
    "h200-gemma.yaml": {
        **SHORTER_TIMEOUT, ("workloads", "mixed", "num_prompts"): FEWER, ("workloads", "mixed", "num_iters"): (3, 1),
        ("models", "google/gemma-4-26B-A4B-it", "engine_args", "skip_tokenizer_init"): (None, True)},
    "h200-gemma-textonly.yaml": {
        **SHORTER_TIMEOUT, ("workloads", "mixed", "num_prompts"): FEWER, ("workloads", "mixed", "num_iters"): (3, 1),
        ("models", "google/gemma-4-26B-A4B-it", "engine_args", "skip_tokenizer_init"): (None, True),
        **{("models", "google/gemma-4-26B-A4B-it", "engine_args", "limit_mm_per_prompt", m): (None, 0)
           for m in ("image", "audio", "video")}},
    "h200-gemma-mm.yaml": {
        **SHORTER_TIMEOUT, ("workloads", "mixed", "num_prompts"): FEWER, ("workloads", "mixed", "num_iters"): (3, 1)},
    "h200-findings-26-18.yaml": {
        **SHORTER_TIMEOUT,
        **{("workloads", w, "num_prompts"): FEWER for w in ("mixed", "audio")}},
    # run before seed.yaml's Jamba entry gained min_gpu_memory_gib (session 10); frozen since, as
    # recorded results carry its sha256 (h200-rest-29-26-b.yaml is its successor, with the requirement)
    "h200-rest-29-26.yaml": {
        **SHORTER_TIMEOUT,
        **{("workloads", w, "num_prompts"): FEWER for w in ("mixed", "librispeech", "text-only", "image", "video")},
        ("models", JAMBA, "requires", "min_gpu_memory_gib"): (100.0, None),
        ("models", JAMBA, "requires", "reason"): (JAMBA_WHY, None)},
    "h200-rest-29-26-b.yaml": {
        **SHORTER_TIMEOUT,
        **{("workloads", w, "num_prompts"): FEWER for w in ("mixed", "librispeech", "text-only", "image", "video")}},
}


def _flat(value, path: tuple = ()) -> dict[tuple, object]:
    if isinstance(value, dict):
        out: dict[tuple, object] = {}
        for k, v in value.items():
            out.update(_flat(v, path + (k,)))
        return out
    return {path: value}


def _diff(a: dict, b: dict, prefix: tuple) -> dict[tuple, tuple]:
    fa, fb = _flat(a), _flat(b)
    return {prefix + p: (fa.get(p), fb.get(p)) for p in fa.keys() | fb.keys() if fa.get(p) != fb.get(p)}


def differences(copy: Path, seed: Path) -> dict[tuple, tuple]:
    """Every value in which `copy` departs from `seed`, as (seed's, copy's); the copy's models and
    workloads must all exist in the seed's table."""
    c, s = load_scenarios(copy).table, load_scenarios(seed).table
    out = _diff({"seed": s.seed, "timeout_s": s.timeout_s}, {"seed": c.seed, "timeout_s": c.timeout_s}, ())
    for name, w in c.workloads.items():
        assert name in s.workloads, f"{copy.name}: workload {name} is not seed.yaml's"
        out.update(_diff(s.workloads[name].model_dump(), w.model_dump(), ("workloads", name)))
    for m in c.models:
        sm = s.model(m.id)
        assert [w for w in sm.workloads if w in m.workloads] == m.workloads, \
            f"{copy.name}: {m.id}'s workloads are not a subset of seed.yaml's in its order"
        out.update(_diff(sm.model_dump(exclude={"workloads"}), m.model_dump(exclude={"workloads"}), ("models", m.id)))
    return out


def copies() -> list[str]:
    return sorted(p.name for p in SCENARIOS.glob("h200-*.yaml"))


def test_every_copy_is_declared_here():
    assert copies() == sorted(DECLARED)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_a_copy_differs_from_the_seed_table_in_what_it_declares_and_nothing_else(name):
    copy = SCENARIOS / name
    assert differences(copy, SCENARIOS / "seed.yaml") == DECLARED[name]
    table = load_scenarios(copy).table
    seed_name = load_scenarios(SCENARIOS / "seed.yaml").table.name
    assert table.name != seed_name and "labelled" in table.description, \
        "a copy never claims the seed's shape: its own name, and 'labelled' in its description"


def test_an_undeclared_change_is_caught(tmp_path):
    # the check itself: a copy with one more change than it declares is a difference
    src = (SCENARIOS / "h200-omni.yaml").read_text()
    changed = src.replace("output_len: 512", "output_len: 511", 1)
    assert changed != src
    (tmp_path / "configs").symlink_to(SCENARIOS / "configs")
    (tmp_path / "h200-omni.yaml").write_text(changed)
    got = differences(tmp_path / "h200-omni.yaml", SCENARIOS / "seed.yaml")
    assert got == {**DECLARED["h200-omni.yaml"], ("workloads", "text", "output_len"): (512, 511)}
