"""Property-based tests (hypothesis) over every loader of user files and the CLI's identifier options.

The only accepted outcomes: a valid object whose identifiers are safe path components (and
whose numbers are in range), or an AblationError of one line. Never another exception, never
a file written outside the directories the command owns. Bounded example counts keep the
whole module under a minute on two cores.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ablation.cli import main
from ablation.errors import AblationError
from ablation.results.canonical import load_canonical
from ablation.spec.findings import load_findings
from ablation.spec.scenarios import load_scenarios
from ablation.spec.stacks import load_stack_file

# The invariants, stated here rather than imported, so that the suite also runs on code without them.
POSIX_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_TOKENS = MAX_COUNT = 10_000_000
MAX_GPUS = 4096

# ABLATION_FUZZ_SCALE=20 for a longer campaign (the default keeps the module under a minute).
_SCALE = int(os.environ.get("ABLATION_FUZZ_SCALE", "1"))
FUZZ = settings(max_examples=150 * _SCALE, deadline=None, suppress_health_check=list(HealthCheck), database=None)
FEW = settings(max_examples=60 * _SCALE, deadline=None, suppress_health_check=list(HealthCheck), database=None)

SPECIAL = ["", ".", "..", "...", "/", "a/b", "a/../b", "../x", "/etc/passwd", "a" * 101, "a" * 300, "a|b", "a\nb",
           "a\0b", "$(touch x)", "X=1; touch x; Y", "A=B", "org/name", "p q/slow", "p_q/slow", "p_q__slow",
           "tiny-llama-2L", "0.28-cpu", "-rf", "~", "é", "名前", "a\\b", " ", "\t", "CON", "x" * 100]
hostile_text = st.one_of(st.sampled_from(SPECIAL), st.text(max_size=40),
                         st.text(alphabet="./_-|$;=\n\0 aA0", max_size=12))
scalars = st.one_of(hostile_text, st.integers(min_value=-(10**40), max_value=10**40),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none())


def one_line(exc: AblationError) -> str:
    text = str(exc)
    assert "\n" not in text and "\r" not in text and text, repr(text)
    return text


def write_yaml(path: Path, data) -> None:
    try:
        path.write_text(yaml.safe_dump(data, allow_unicode=True))
    except UnicodeEncodeError:  # a lone surrogate: not text any editor writes
        path.write_text(yaml.safe_dump(data, allow_unicode=False))


def load_or_one_line(load, path: Path, data):
    """Write `data` as YAML to `path` and load it with `load`: what it loaded, or None once its refusal
    was checked to be one line."""
    write_yaml(path, data)
    try:
        return load(path)
    except AblationError as exc:
        one_line(exc)
        return None


def safe_component(name: str) -> None:
    assert name and name not in (".", "..") and "/" not in name and "\0" not in name, name
    assert len(name) <= 210 and name.isprintable() and "|" not in name, name


# --- stack files ----------------------------------------------------------------------------------

STACK = {"platform": "cpu", "python": "3.11", "engine": "six", "packages": {"six": "1.16.0"}}


@st.composite
def stacks(draw):
    data = dict(STACK)
    for field in draw(st.lists(st.sampled_from(["env", "patches", "overrides", "packages", "leg", "python",
                                                "engine", "exclude", "find_links"]), max_size=4, unique=True)):
        if field == "env":
            data["env"] = draw(st.dictionaries(hostile_text, st.one_of(hostile_text, scalars), max_size=3))
        elif field == "patches":
            data["patches"] = draw(st.lists(st.one_of(hostile_text, st.just("ok.patch")), max_size=3))
        elif field == "overrides":
            data["overrides"] = [{"name": draw(hostile_text), "models": draw(st.lists(hostile_text, max_size=2)),
                                  "pins": {"six": draw(st.one_of(hostile_text, st.just("1.17.0")))},
                                  "reason": draw(hostile_text)}]
        elif field == "packages":
            data["packages"] = {"six": "1.16.0", draw(hostile_text): draw(scalars)}
        elif field == "exclude":
            data["exclude"] = draw(st.dictionaries(hostile_text, scalars, max_size=2))
        else:
            data[field] = draw(scalars)
    return data


file_stems = st.one_of(st.sampled_from(["la", ".", "..", ".hidden", "a+b", "x" * 120, " ", "0.29-cpu"]),
                       st.text(alphabet=st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)),
                               min_size=1, max_size=30))


@FUZZ
@given(stem=file_stems, data=stacks())
def test_stack_loader(tmp_path_factory, stem, data):
    root = tmp_path_factory.mktemp("stack")
    (root / "patches").mkdir()
    (root / "patches" / "ok.patch").write_text("")
    (root / "stacks").mkdir()
    path = root / "stacks" / f"{stem}.yaml"
    try:
        write_yaml(path, data)
    except OSError:  # a name this file system cannot hold
        return
    try:
        sf = load_stack_file(path)  # patches/ beside stacks/: the same directory by either rule
    except AblationError as exc:
        one_line(exc)
        return
    safe_component(sf.leg)
    assert "+" not in sf.leg and not sf.leg.startswith(".") and len(sf.leg) <= 100
    for name in sf.stack.env:
        assert POSIX_NAME.fullmatch(name), name
    for p in sf.stack.patches:
        patches = (root / "patches").resolve()
        assert (patches / p).resolve().is_relative_to(patches) and (patches / p).resolve() != patches, p
    for o in sf.stack.overrides:
        safe_component(f"{sf.leg}+{o.name}")


@FEW
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_any_text_as_a_stack_or_scenario_or_canonical_file(tmp_path_factory, text):
    root = tmp_path_factory.mktemp("raw")
    (root / "stacks").mkdir()
    for name, load in (("stacks/la.yaml", load_stack_file), ("table.yaml", load_scenarios),
                       ("CANONICAL.yaml", load_canonical), ("findings.yaml", load_findings)):
        path = root / name
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            load(path)
        except AblationError as exc:
            one_line(exc)


# --- scenario tables ------------------------------------------------------------------------------

ONE = {"kind": "throughput", "num_prompts": 1, "input_len": {"min": 1, "max": 1}, "output_len": 1}


@st.composite
def scenario_tables(draw):
    ids = draw(st.lists(st.one_of(hostile_text, st.sampled_from(["org/name", "p_q/slow", "p_q__slow", "Org/Name"])),
                        min_size=1, max_size=3))
    workload = dict(ONE)
    wname = draw(st.one_of(st.just("mixed"), hostile_text))
    models = []
    for i in ids:
        m = {"id": i, "source": {"generate": "tiny-llama"}, "workloads": [wname]}
        for field in draw(st.lists(st.sampled_from(["tp", "max_model_len", "timeout_s", "engine_env", "requires",
                                                    "dtype"]), max_size=3, unique=True)):
            if field == "engine_env":
                m[field] = draw(st.dictionaries(hostile_text, hostile_text, max_size=2))
            elif field == "requires":
                m[field] = {"min_gpus": draw(scalars), "min_compute_capability": draw(scalars)}
            else:
                m[field] = draw(scalars)
        models.append(m)
    for field in draw(st.lists(st.sampled_from(["num_prompts", "output_len", "num_iters"]), max_size=2, unique=True)):
        workload[field] = draw(scalars)
    data = {"name": draw(st.one_of(st.just("t"), hostile_text)), "workloads": {wname: workload}, "models": models}
    if draw(st.booleans()):
        data["timeout_s"] = draw(scalars)
    return data


@FUZZ
@given(data=scenario_tables())
def test_scenario_loader(tmp_path_factory, data):
    sf = load_or_one_line(load_scenarios, tmp_path_factory.mktemp("scen") / "table.yaml", data)
    if sf is None:
        return
    slugs = [m.slug for m in sf.table.models]
    assert len({s.lower() for s in slugs}) == len(slugs), slugs
    for m in sf.table.models:
        safe_component(m.slug)
        assert "|" not in m.id and m.id.isprintable()
        assert isinstance(m.tp, int) and not isinstance(m.tp, bool) and 1 <= m.tp <= MAX_GPUS
        assert m.max_model_len is None or 1 <= m.max_model_len <= MAX_TOKENS
        assert m.timeout_s is None or (math.isfinite(m.timeout_s) and m.timeout_s > 0)
        assert m.requires.min_gpus is None or m.requires.min_gpus >= 0
        for name in m.engine_env:
            assert POSIX_NAME.fullmatch(name), name
    assert math.isfinite(sf.table.timeout_s) and sf.table.timeout_s > 0
    for w in sf.table.workloads.values():
        if w.kind == "throughput":
            assert 1 <= w.num_prompts <= MAX_COUNT


# --- CANONICAL.yaml --------------------------------------------------------------------------------


@FEW
@given(entries=st.lists(st.dictionaries(st.sampled_from(["leg", "model", "run", "machine", "reason", "excluded",
                                                         "other"]), scalars, max_size=6), max_size=3),
       extra=st.dictionaries(hostile_text, scalars, max_size=2))
def test_canonical_loader(tmp_path_factory, entries, extra):
    can = load_or_one_line(load_canonical, tmp_path_factory.mktemp("can") / "CANONICAL.yaml",
                           {"generated_at": "x", "entries": entries, **extra})
    if can is None:
        return
    assert all(isinstance(e.run, str) for e in can.entries)


# --- the CLI's identifier options --------------------------------------------------------------------

TABLE = ("name: t\nworkloads:\n  mixed: {kind: throughput, num_prompts: 1, input_len: {min: 1, max: 1}, "
         "output_len: 1}\nmodels:\n  - {id: org/m, source: {generate: tiny-llama}, workloads: [mixed]}\n")
STACK_TEXT = ('platform: cpu\npython: "3.11"\nengine: six\npackages:\n  six: "1.16.0"\noverrides:\n'
              '  - {name: a-variant-name-too-long-for-the-fuzzer-to-hit, models: [org/m], pins: {six: "1.17.0"}, '
              'reason: test}\n')
LEG = "a-leg-name-too-long-for-the-fuzzer-to-hit-by-chance-0123456789"  # so no fuzzed leg builds a venv


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    (root / "stacks").mkdir()
    (root / "patches").mkdir()
    (root / "stacks" / f"{LEG}.yaml").write_text(STACK_TEXT.replace("platform: cpu", "platform: cuda"))
    (root / "table.yaml").write_text(TABLE)
    return root


def invoke(root: Path, *args: str) -> None:
    """The CLI in-process: exit 2 with exactly one `error:` line, or exit 0; never an exception."""
    result = CliRunner().invoke(main, ["--stacks-dir", str(root / "stacks"), "--patches-dir", str(root / "patches"),
                                       "--venv-root", str(root / "venvs"), *args],
                                env={"ABLATION_LOCK_FILE": str(root / "host.lock"),
                                     "ABLATION_MODELS_ROOT": str(root / "models")})
    if result.exit_code == 2 and isinstance(result.exception, SystemExit):
        errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and result.stderr.rstrip().splitlines()[-1] == errors[0], result.stderr
    else:
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args, result.exc_info and "".join(__import__("traceback").format_exception(*result.exc_info)))
        assert result.exit_code in (0, 2), (args, result.exit_code, result.output)
    made = {p.name for p in root.iterdir()} - {"stacks", "patches", "table.yaml", "results", "host.lock",
                                                  "host.holder.json"}
    assert not made, made  # nothing outside the command's own folders (no venv built, no model made)
    results = root / "results"
    if results.is_dir():
        for p in results.rglob("*"):
            assert p.resolve().is_relative_to(results.resolve())
        assert not any(results.iterdir()), list(results.iterdir())


identifier = st.one_of(hostile_text.filter(lambda s: "\0" not in s and not s.startswith("-")),
                       st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._@+-]{0,20}\Z"))


@FEW
@given(leg=identifier, run_id=identifier, option=st.sampled_from(["--run-id", "--resume"]))
def test_cli_run_identifiers(sandbox, leg, run_id, option):
    invoke(sandbox, "run", "--scenarios", str(sandbox / "table.yaml"), "--results", str(sandbox / "results"),
           "--leg", leg, option, run_id)


@FEW
@given(leg=identifier, variant=identifier, command=st.sampled_from(["show", "env", "build"]))
def test_cli_stacks_identifiers(sandbox, leg, variant, command):
    args = ["stacks", command, leg] + (["--variant", variant] if command == "build" else [])
    invoke(sandbox, *args)


@FEW
@given(variant=identifier)
def test_cli_variant_names(sandbox, variant):
    invoke(sandbox, "stacks", "build", LEG, "--variant", variant)


@FEW
@given(model_id=identifier)
def test_cli_model_ids(sandbox, model_id):
    (sandbox / "table.yaml").write_text(TABLE.replace("{id: org/m,", "{id: " + json.dumps(model_id) + ","))
    try:
        invoke(sandbox, "run", "--scenarios", str(sandbox / "table.yaml"), "--results", str(sandbox / "results"),
               "--leg", LEG)
    finally:
        (sandbox / "table.yaml").write_text(TABLE)


# --- seed findings (report --seed-findings) --------------------------------------------------------

FINDINGS = yaml.safe_load((Path(__file__).resolve().parent.parent / "scenarios" / "seed-findings-h200.yaml")
                          .read_text())


@FUZZ
@given(where=st.sampled_from(["name", "source", "legs", "seed_requests", "ratio.group", "ratio.model",
                              "ratio.workload", "ratio.baseline", "ratio.kind", "seed.ratio", "seed.baseline",
                              "seed.passes", "expect.leg", "expect.variant", "expect.cause", "expect.seed",
                              "expect.value", "expect.status"]),
       value=st.one_of(scalars, st.dictionaries(hostile_text, scalars, max_size=2)))
def test_findings_loader(tmp_path_factory, where, value):
    """One field of the real findings file replaced by a hostile value: a one-line error, or findings
    whose text can sit in a Markdown table cell and whose numbers are finite and positive."""
    import copy

    data = copy.deepcopy(FINDINGS)
    head, _, tail = where.partition(".")
    target = {"ratio": data["ratios"][0], "seed": data["ratios"][0]["seed"],
              "expect": data["outcomes"][0]["expect"][0]}.get(head, data)
    target[tail or head] = value
    fs = load_or_one_line(load_findings, tmp_path_factory.mktemp("find") / "findings.yaml", data)
    if fs is None:
        return
    for f in fs.ratios:
        for text in (f.group, f.model, f.workload, f.baseline, f.candidate, fs.legs[f.baseline]):
            assert "|" not in text and text.isprintable() and text.strip(), text
        for x in (f.seed.ratio, f.seed.baseline, f.seed.candidate):
            assert math.isfinite(x) and x > 0
    for o in fs.outcomes:
        for e in o.expect:
            for text in (e.seed, e.cause or "x", e.leg, fs.legs[e.leg]):
                assert "|" not in text and text.isprintable() and text.strip(), text
