"""Find the first release between a good and a bad leg where one scenario regressed.

1. The releases of the engine distribution strictly between the two legs'
   versions come from the package index (`pip index versions`), or --releases.
2. For each, a stack file is derived from the good leg's stack: the engine pin
   changes; any other pin is changed only if uv cannot resolve it together
   with that release (then it is re-pinned to what uv resolves, and the
   derivation says so). Derived stacks are written into the bisect directory.
3. Only the chosen (model, workload) runs, from a sub-table of the scenario
   table, with repeats, legs interleaved. good and bad are measured first; a
   regression needs statistical support: the comparer's own test (Welch's t on
   log values, ablation.analysis.stats; each probe against good is a family of
   one cell, so at 5%) gives the verdict "slower" AND the ratio (of geometric
   means) is beyond the threshold. Then a binary search.
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.version import InvalidVersion, Version

from ablation.analysis.stats import ALPHA, METHOD, METHOD_TEXT, MIN_REPEATS, RatioEstimate, compare_samples
from ablation.errors import AblationError
from ablation.execution.sweep import Sweep, SweepOptions
from ablation.results.store import load_results
from ablation.spec.scenarios import ScenarioFile, load_scenarios
from ablation.spec.stacks import StackDir, StackFile
from ablation.util.jsonio import write_json_atomic
from ablation.util.timestamps import utc_stamp


@dataclass
class Probe:
    release: str
    leg: str
    values: list[float]
    estimate: RatioEstimate | None = None  # against good
    regressed: bool | None = None


def parse_threshold(text: str) -> float:
    """A regression size as a fraction: '5%' or '0.05'. A bare number above 1 ('5') is refused:
    it could mean 5% or 500%, and read as 500% nothing could ever regress."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(%?)\s*", text)
    if not m:
        raise AblationError(f"--threshold: '{text}' is not a percentage or a fraction; write 5% or 0.05")
    value = float(m.group(1))
    if m.group(2):
        if not 0 < value < 100:
            raise AblationError(f"--threshold: {text.strip()} must be between 0% and 100% (exclusive)")
        return value / 100
    if value >= 1:
        raise AblationError(f"--threshold: '{text.strip()}' is ambiguous; write {text.strip()}% for a "
                            f"percentage or a fraction below 1 (0.05 for 5%)")
    if value <= 0:
        raise AblationError(f"--threshold: '{text.strip()}' must be above 0; write e.g. 5% or 0.05")
    return value


def parse_releases(text: str) -> list[str]:
    """--releases: comma-separated versions; anything that is not a version is refused, not skipped."""
    releases = [v.strip() for v in text.split(",") if v.strip()]
    if not releases:
        raise AblationError("--releases: no release given; write e.g. 0.28.0,0.29.0")
    for v in releases:
        try:
            Version(v)
        except InvalidVersion:
            raise AblationError(f"--releases: '{v}' is not a version (e.g. 0.29.0)") from None
        if not re.fullmatch(r"[0-9A-Za-z._-]{1,64}", v):  # it names a derived leg: no '+' (variants), no '!'
            raise AblationError(f"--releases: '{v}' is not a public release version (e.g. 0.29.0)")
    return releases


def new_bisect_dir(out_root: Path) -> Path:
    """<out_root>/<utc id>, or <utc id>-2, -3, ... when one was made in the same second: never
    someone else's directory, never a FileExistsError."""
    stamp = utc_stamp("id")
    out_root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = out_root / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise AblationError(f"--out: {out_root} already holds 1000 bisects started at {stamp}")


def index_versions(dist: str, sf: StackFile) -> list[str]:
    """Every version the index offers for `dist` (pip's own listing, sources from the stack)."""
    argv = [sys.executable, "-m", "pip", "index", "versions", dist, "--disable-pip-version-check",
            *sf.stack.source_args()]
    out = subprocess.run(argv, capture_output=True, text=True)
    m = re.search(r"Available versions: (.*)", out.stdout)
    if not m:
        raise AblationError(f"could not list releases of {dist}: {(out.stderr or out.stdout).strip()[:200]}; "
                            "pass --releases")
    return [v.strip() for v in m.group(1).split(",")]


def releases_between(versions: list[str], good: str, bad: str) -> list[str]:
    """Final releases strictly between good and bad, oldest first."""
    try:
        lo, hi = Version(good), Version(bad)
    except InvalidVersion as exc:
        raise AblationError(f"--good/--bad: the engine pin is not a version ordering releases ({exc})") from None
    if lo >= hi:
        raise AblationError(f"--good {good} is not older than --bad {bad}")
    keep = []
    for v in versions:
        try:
            pv = Version(v)
        except InvalidVersion:
            continue
        if lo < pv < hi and not pv.is_prerelease and not pv.is_devrelease and not pv.is_postrelease:
            keep.append(v)
    return sorted(set(keep), key=Version)


def _compile(uv: str, sf: StackFile, pins: dict[str, str], workdir: Path) -> tuple[bool, str]:
    req = workdir / "bisect-req.txt"
    req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
    argv = [uv, "pip", "compile", "--quiet", "--no-header", "--python-version", sf.stack.python, str(req)]
    if sf.stack.exclude:
        ex = workdir / "bisect-excludes.txt"
        ex.write_text("".join(f"{n}\n" for n in sorted(sf.stack.exclude)))
        argv += ["--excludes", str(ex)]
    argv += sf.stack.source_args()
    out = subprocess.run(argv, capture_output=True, text=True)
    return out.returncode == 0, out.stdout if out.returncode == 0 else out.stderr


def derive_stack(template: StackFile, release: str, out_dir: Path, uv: str) -> tuple[Path, list[str]]:
    """Write <out_dir>/<leg>.yaml for `release`; return it and what was changed and why."""
    s = template.stack
    engine = s.engine
    pins = dict(s.packages)
    pins[engine] = release
    notes = [f"{engine}: {s.packages[engine]} -> {release}"]
    ok, output = _compile(uv, template, pins, out_dir)
    dropped: list[str] = []
    for name in [n for n in s.packages if n != engine]:
        if ok:
            break
        trial = {k: v for k, v in pins.items() if k != name and k not in dropped}
        ok, output = _compile(uv, template, trial, out_dir)
        dropped.append(name)
    if not ok:
        raise AblationError(f"{template.path}: field 'packages': {engine}=={release} does not resolve with this "
                            f"stack even with {', '.join(dropped)} unpinned: {output.strip().splitlines()[-1][:200]}")
    resolved = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", output, re.M))
    for name in dropped:
        new = resolved.get(name.lower()) or resolved.get(name)
        if new:
            pins[name] = new
            notes.append(f"{name}: {s.packages[name]} -> {new} (required by {engine}=={release}'s metadata)")
        else:
            pins.pop(name)
            notes.append(f"{name}: unpinned, no longer required by {engine}=={release}")
    leg = f"{release}-{s.platform}-bisect"
    data = s.model_dump(exclude_none=True)
    data.update(leg=leg, packages=pins, overrides=[],
                description=f"derived by `ablation bisect` from {template.path.name}: " + "; ".join(notes))
    path = out_dir / "stacks" / f"{leg}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, notes


def sub_table(scenarios: ScenarioFile, model_id: str, workload: str, out_dir: Path) -> ScenarioFile:
    """The scenario table reduced to one model and one workload, written beside the bisect results."""
    table = scenarios.table
    spec = table.model(model_id)
    if workload not in spec.workloads:
        raise AblationError(f"{scenarios.path}: model '{model_id}' has no workload '{workload}' "
                            f"(it has {', '.join(spec.workloads)})")
    data = table.model_dump(mode="json", exclude_none=True)
    data["models"] = [m for m in data["models"] if m["id"] == model_id]
    data["models"][0]["workloads"] = [workload]
    src = data["models"][0]["source"]
    if "path" in src and not Path(src["path"]).is_absolute():
        src["path"] = str((scenarios.path.parent / src["path"]).resolve())
    data["workloads"] = {workload: data["workloads"][workload]}
    data["description"] = f"bisect sub-table of {scenarios.path} (sha256 {scenarios.sha256[:12]})"
    path = out_dir / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_scenarios(path)


def regressed(est: RatioEstimate, threshold: float) -> bool:
    """Worse with statistical support (verdict 'slower') AND by more than the threshold."""
    return est.verdict == "slower" and est.ratio <= 1 - threshold


VERDICT_TEXT = (f"{METHOD_TEXT} against the good leg (the comparer's test; each probe is a family of one, at "
                f"{ALPHA:.0%}); ratio = geometric means, interval = the test's {1 - ALPHA:.0%} interval; "
                f"regressed = verdict 'slower' and the ratio beyond the threshold; fewer than {MIN_REPEATS} "
                "repeats: no verdict, never regressed")


@dataclass
class BisectPlan:
    model_id: str
    workload: str
    good_leg: str
    bad_leg: str
    metric: str  # throughput | latency
    threshold: float
    repeats: int
    out_dir: Path
    wait_for_lock: bool = False
    harness: Path | None = None  # fault injection only (tests/fault_harness.py)


@dataclass
class BisectSetup:
    plan: BisectPlan
    good: StackFile
    bad: StackFile
    between: list[str]
    table: ScenarioFile  # the one-model, one-workload sub-table


def setup_bisect(stacks: StackDir, patches_dir: Path, *, target: str, good: str, bad: str, scenario_path: Path,
                 metric: str | None, threshold: str, repeats: int, releases: str | None, out_root: Path,
                 wait: bool, harness: Path | None) -> BisectSetup:
    """Validate the request, then lay out <out_root>/<utc id>/ with copies of the two stacks and
    the patches (derived stacks are written beside them), and the sub-table."""
    threshold_value = parse_threshold(threshold)  # every refusal before a directory is made
    model_id, sep, workload = target.rpartition("/")
    if not sep or not model_id:
        raise AblationError(f"--scenario: '{target}' must be MODEL/WORKLOAD (e.g. tiny-llama-2L/mixed)")
    scenarios = load_scenarios(scenario_path)
    spec = scenarios.table.model(model_id)
    if workload not in scenarios.table.workloads:
        raise AblationError(f"--scenario: workload '{workload}' is not in {scenario_path}")
    good_sf, bad_sf = stacks.load(good), stacks.load(bad)
    if good_sf.stack.engine != bad_sf.stack.engine:
        raise AblationError(f"--good {good} and --bad {bad} pin different engines "
                            f"({good_sf.stack.engine}, {bad_sf.stack.engine})")
    versions = parse_releases(releases) if releases else index_versions(good_sf.stack.engine, good_sf)
    between = releases_between(versions, good_sf.stack.engine_version, bad_sf.stack.engine_version)
    if out_root.exists() and not out_root.is_dir():
        raise AblationError(f"--out: {out_root} is a file; give a directory")
    out_dir = new_bisect_dir(out_root)
    (out_dir / "stacks").mkdir()
    (out_dir / "patches").mkdir()
    if patches_dir.is_dir():
        shutil.copytree(patches_dir, out_dir / "patches", dirs_exist_ok=True)
    for sf in (good_sf, bad_sf):
        shutil.copy(sf.path, out_dir / "stacks" / sf.path.name)
    plan = BisectPlan(spec.id, workload, good, bad, metric or scenarios.table.workloads[workload].kind,
                      threshold_value, repeats, out_dir, wait,
                      harness.resolve() if harness else None)
    return BisectSetup(plan, good_sf, bad_sf, between, sub_table(scenarios, spec.id, workload, out_dir))


class Bisector:
    def __init__(self, sweep: Sweep, log=print):
        self.sweep = sweep
        self.log = log

    def measure(self, plan: BisectPlan, legs: list[str], table: ScenarioFile, run_id: str) -> dict[str, list[float]]:
        opts = SweepOptions(legs=legs, scenarios=table, results_root=plan.out_dir / "runs", run_id=run_id,
                            repeats=plan.repeats, wait_for_lock=plan.wait_for_lock, harness=plan.harness)
        run_dir, _ = self.sweep.run(opts)
        values: dict[str, list[float]] = {leg: [] for leg in legs}
        for r in load_results([run_dir]).results:
            w = r.workloads.get(plan.workload)
            if r.status == "PASS" and w is not None:
                values[r.leg].append(w.value)
        for leg, v in values.items():
            if not v:
                raise AblationError(f"bisect: {leg} produced no passing measurement of {plan.model_id}/"
                                    f"{plan.workload}; see {run_dir / leg}")
        return values

    def judge(self, plan: BisectPlan, good: list[float], probe: Probe) -> None:
        """The comparer's test on this probe against good (one cell, so no family correction):
        regressed only with the verdict 'slower' AND the ratio beyond the threshold."""
        est = compare_samples(good, probe.values, higher_is_better=plan.metric == "throughput")
        probe.estimate = est
        probe.regressed = regressed(est, plan.threshold)

    def run(self, plan: BisectPlan, good_sf: StackFile, bad_sf: StackFile, releases: list[str],
            table: ScenarioFile) -> dict:
        from ablation.envs.installers import find_uv

        uv = find_uv()
        if not uv:
            raise AblationError("bisect derives stacks with uv, and uv was not found")
        probes: dict[str, Probe] = {}
        order = [good_sf.stack.engine_version, *releases, bad_sf.stack.engine_version]
        legs = {order[0]: good_sf.leg, order[-1]: bad_sf.leg}
        derivations = {}
        for rel in releases:
            path, notes = derive_stack(good_sf, rel, plan.out_dir, uv)
            legs[rel] = path.stem
            derivations[rel] = notes
            self.log(f"[bisect] derived {path.name}: {'; '.join(notes)}")
        ends = self.measure(plan, [legs[order[0]], legs[order[-1]]], table, "ends")
        # A copy: the good leg's pooled values grow with every probe, its probe's own values must not.
        good_values = list(ends[legs[order[0]]])
        for rel in (order[0], order[-1]):
            probes[rel] = Probe(rel, legs[rel], ends[legs[rel]])
            self.judge(plan, good_values, probes[rel])
        verdict: dict = {}
        if not probes[order[-1]].regressed:
            verdict = {"first_bad": None, "reason": "the bad leg is not measurably worse than the good leg "
                       f"beyond {plan.threshold:.0%}: nothing to bisect"}
        else:
            lo, hi = 0, len(order) - 1  # order[lo] good, order[hi] bad
            while hi - lo > 1:
                mid = (lo + hi) // 2
                rel = order[mid]
                vals = self.measure(plan, [legs[order[0]], legs[rel]], table, f"probe-{rel}")
                good_values += vals[legs[order[0]]]  # the good leg is re-measured beside every probe
                probes[rel] = Probe(rel, legs[rel], vals[legs[rel]])
                self.judge(plan, vals[legs[order[0]]], probes[rel])
                if probes[rel].regressed:
                    hi = mid
                else:
                    lo = mid
                self.log(f"[bisect] {rel}: {probes[rel].estimate.ratio:.3f}x of good, "
                         f"{'regressed' if probes[rel].regressed else 'not regressed'}")
            verdict = {"first_bad": order[hi], "last_good": order[lo],
                       "reason": f"{order[hi]} is the first release whose {plan.metric} is worse than "
                                 f"{order[0]} by more than {plan.threshold:.0%} with the verdict 'slower' "
                                 f"({METHOD_TEXT}, interval excluding 1.0); {order[lo]} is not"}
        summary = {
            "scenario": f"{plan.model_id}/{plan.workload}", "metric": plan.metric, "threshold": plan.threshold,
            "repeats": plan.repeats, "method": METHOD, "verdict_rule": VERDICT_TEXT, "good": order[0], "bad": order[-1], "releases_between": releases,
            "derivations": derivations, **verdict,
            "good_values_pooled": good_values,  # the good leg as measured beside the ends and every probe
            "tried": [{"release": p.release, "leg": p.leg, "values": p.values,
                       "ratio_to_good": p.estimate.ratio if p.estimate else None,
                       "interval": [p.estimate.low, p.estimate.high] if p.estimate else None,
                       "p": p.estimate.p if p.estimate else None,
                       "verdict": p.estimate.verdict if p.estimate else None, "regressed": p.regressed}
                      for p in sorted(probes.values(), key=lambda p: Version(p.release))],
        }
        write_json_atomic(plan.out_dir / "bisect.json", summary)
        return summary


def render_summary(summary: dict) -> str:
    lines = [f"Bisect {summary['scenario']} ({summary['metric']}, threshold {summary['threshold']:.0%}, "
             f"{summary['repeats']} repeats): good {summary['good']}, bad {summary['bad']}", ""]
    lines.append("| release | median | ratio to good | 95% interval | verdict | regressed |")
    lines.append("|---|---|---|---|---|---|")
    for t in summary["tried"]:
        vals = t["values"]
        med = statistics.median(vals) if vals else None
        iv = t["interval"]
        interval = f"[{iv[0]:.3f}, {iv[1]:.3f}]" if iv and iv[0] is not None else "none (unrepeated)"
        lines.append(f"| {t['release']} | {med:.4g} | {t['ratio_to_good']:.3f}x | {interval} | {t['verdict']} | "
                     f"{'yes' if t['regressed'] else 'no'} |")
    lines.append("")
    lines.append(f"verdicts: {summary.get('verdict_rule', VERDICT_TEXT)}")
    for rel, notes in summary["derivations"].items():
        lines.append(f"derived {rel}: {'; '.join(notes)}")
    lines.append("")
    lines.append(f"first bad release: {summary.get('first_bad') or 'none'} — {summary['reason']}")
    return "\n".join(lines)
