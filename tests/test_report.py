"""Canonical runs, cross-architecture comparison and the generated report."""

from __future__ import annotations

import json
import os
import re
import struct

import pytest
import yaml
from browser import PAGE_HEADINGS, PAGE_IMAGES, PAGE_LIST_ITEMS, PAGE_PARAGRAPHS, PAGE_TABLES, Chromium, chromium_path
from helpers import one_line_error, run_cli
from resultfactory import write_result

# The seed's B200 vs H200 rows (shared/seeds/h200-vllm-ablation-report.txt, "What transfers").
B200 = {("gpt-oss-120b", "mixed"): (7304, 24176, 24200), ("Llama-3.1-8B-Instruct", "long-context"): (300, 300, 300),
        ("Llama-3.1-8B-Instruct", "mixed"): (15000, 15150, 15000)}
H200 = {("gpt-oss-120b", "mixed"): (11290, 11635, 11698), ("Llama-3.1-8B-Instruct", "long-context"): (109, 167, 167),
        ("Llama-3.1-8B-Instruct", "mixed"): (12779, 12931, 12849)}
LEGS = ("0.18", "0.26", "0.29")


def arch_results(root, data, gpu, sha="same-table", skip_glm=False, fail_gemma18=False):
    per: dict[tuple[str, str], dict[str, float]] = {}
    for (model, workload), values in data.items():
        for leg, v in zip(LEGS, values):
            per.setdefault((leg, model), {})[workload] = v
    for (leg, model), values in per.items():
        write_result(root, leg, model, values, sha=sha)
    for leg in LEGS:
        if skip_glm:
            write_result(root, leg, "GLM-5.2-NVFP4", {}, status="SKIP", skip_reason="NVFP4 is Blackwell-only", sha=sha)
        else:
            write_result(root, leg, "GLM-5.2-NVFP4", {"mixed": 100}, sha=sha)
    if fail_gemma18:
        write_result(root, "0.18", "gemma-4", {}, status="FAIL", sha=sha,
                     cause={"class": "unsupported-model", "signature": "ValidationError"})
        for leg in LEGS[1:]:
            write_result(root, leg, "gemma-4", {"mixed": 8000}, sha=sha)
    for path in root.rglob("results*.json"):  # one machine recorded on every task, as the executor does
        rec = json.loads(path.read_text())
        rec["machine"] = {"gpus": [{"name": gpu}]}
        path.write_text(json.dumps(rec))
    return root


def test_compare_arch_flags_what_does_not_transfer(tmp_path):
    h = arch_results(tmp_path / "h200", H200, "NVIDIA H200", skip_glm=True, fail_gemma18=True)
    b = arch_results(tmp_path / "b200", B200, "NVIDIA B200", fail_gemma18=True)
    out = run_cli("compare-arch", str(h), str(b), "--names", "H200,B200")
    assert out.returncode == 0, out.stderr
    assert "| gpt-oss-120b mixed | 26/18 | 1.03x | 3.31x | 3.21x |" in out.stdout
    assert "| Llama-3.1-8B-Instruct long-context | 26/18 | 1.53x | 1.00x | 1.53x |" in out.stdout
    assert "Llama-3.1-8B-Instruct mixed" not in out.stdout  # 1.01x vs 1.01x: transfers, not flagged
    assert "| GLM-5.2-NVFP4 | 0.18 | SKIP (NVFP4 is Blackwell-only) | PASS | n/a on H200 |" in out.stdout
    assert "| gemma-4 | 0.18 | FAIL (unsupported-model) | FAIL (unsupported-model) | both |" in out.stdout
    # a higher threshold flags less
    assert "gpt-oss-120b mixed" in run_cli("compare-arch", str(h), str(b), "--threshold", "3.0").stdout
    assert "Llama-3.1-8B-Instruct long-context" not in run_cli("compare-arch", str(h), str(b), "--threshold",
                                                                "3.0").stdout


def test_compare_arch_refuses_different_scenario_tables(tmp_path):
    h = arch_results(tmp_path / "h", H200, "NVIDIA H200", sha="table-one")
    b = arch_results(tmp_path / "b", B200, "NVIDIA B200", sha="table-two")
    line = one_line_error(run_cli("compare-arch", str(h), str(b)))
    assert "scenario tables differ" in line and "--allow-mismatch" in line
    loud = run_cli("compare-arch", str(h), str(b), "--allow-mismatch")
    assert loud.returncode == 0 and loud.stdout.startswith("WARNING: scenario tables differ")


def test_canonical_says_which_excluded_run_is_another_environment_shown_in_coverage(tmp_path):
    root = tmp_path / "results"
    write_result(root / "base", "0.26-h200", "g", {}, status="FAIL", started_at=100,
                 cause={"class": "dependency", "signature": "AmbiguousGlobalPerLayerAttributeError"})
    write_result(root / "variant-old", "0.26-h200", "g", {}, status="FAIL", started_at=150, variant="v",
                 cause={"class": "runtime-crash", "signature": "OSError"})
    write_result(root / "variant", "0.26-h200", "g", {"mixed": 8100}, started_at=200, variant="v")
    assert run_cli("canonical", str(root)).returncode == 0
    entry = yaml.safe_load((root / "CANONICAL.yaml").read_text())["entries"][0]
    reasons = {x["run"]: x["reason"] for x in entry["excluded"]}
    assert entry["run"] == "variant"
    assert reasons["base"].endswith("another environment (base venv): shown in coverage and failure attribution, "
                                    "not in values")
    assert reasons["variant-old"] == "FAIL; variant used"  # the chosen run's own environment: superseded


def test_canonical_picks_newest_passing_run_and_is_editable(tmp_path):
    root = tmp_path / "results"
    old = write_result(root / "run-a", "0.29-cpu", "m", {"mixed": 100})
    new_fail = write_result(root / "run-c", "0.29-cpu", "m", {}, status="FAIL", cause={"class": "oom",
                                                                                       "signature": "OOM"})
    mid = write_result(root / "run-b", "0.29-cpu", "m", {"mixed": 200})
    write_result(root / "run-a", "0.28-cpu", "m", {"mixed": 100})
    for i, p in enumerate((old, mid, new_fail)):  # start times in run order a < b < c
        rec = json.loads(p.read_text())
        rec["started_at"] = 1000 + i
        p.write_text(json.dumps(rec))
    # without CANONICAL: the same rule, and a warning instead of silently mixing runs
    out = run_cli("compare", str(root))
    assert "| m | 1 | mixed | 100 | 200 | 2.00x (1 pass, no verdict) |" in out.stdout
    assert "0.29-cpu/m: 3 runs and no CANONICAL entry; using run-b" in out.stderr
    made = run_cli("canonical", str(root))
    assert made.returncode == 0, made.stderr
    can = yaml.safe_load((root / "CANONICAL.yaml").read_text())
    entry = next(e for e in can["entries"] if e["leg"] == "0.29-cpu")
    assert entry["run"] == "run-b" and {x["run"] for x in entry["excluded"]} == {"run-a", "run-c"}
    assert any("FAIL" in x["reason"] for x in entry["excluded"])
    assert "already" not in made.stdout and one_line_error(run_cli("canonical", str(root)))
    # a hand edit decides the table
    text = (root / "CANONICAL.yaml").read_text().replace("run: run-b", "run: run-a", 1)
    (root / "CANONICAL.yaml").write_text(text)
    out = run_cli("compare", str(root))
    assert "| m | 1 | mixed | 100 | 100 | 1.00x (1 pass, no verdict) |" in out.stdout and "no CANONICAL entry" not in out.stderr
    (root / "CANONICAL.yaml").write_text(text.replace("run: run-a", "run: run-zzz", 1))
    assert "run 'run-zzz' has no results here" in one_line_error(run_cli("compare", str(root)))


def test_a_group_with_nothing_compared_says_so_and_claims_no_absence_of_change(tmp_path):
    # Issue 28's reports: gemma-4 on 0.29 alone on one H100 (one leg), and 0.18 FAIL beside a 0.26 PASS on
    # another machine (two legs, no cell with values on both). Neither group compared anything, so "no change
    # detected" would be a claim about a comparison that never happened.
    h100 = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-7"}]}
    h200 = {"gpus": [{"name": "NVIDIA H200", "uuid": "GPU-8"}]}
    write_result(tmp_path / "one-leg", "0.29", "gemma-4", {"mixed": 5417.0, "single-request": 4.88}, machine=h100)
    write_result(tmp_path / "one-side", "0.18", "gemma-4", {}, status="FAIL", machine=h200,
                 cause={"class": "unsupported-model", "signature": "ValidationError"})
    write_result(tmp_path / "one-side", "0.26", "gemma-4", {"mixed": 8410.0}, machine=h200)
    out_dir = tmp_path / "report"
    proc = run_cli("report", str(tmp_path / "one-leg"), str(tmp_path / "one-side"), "--out", str(out_dir))
    assert proc.returncode == 0, proc.stderr
    md = (out_dir / "REPORT.md").read_text()
    heads = re.findall(r"### Headline findings · ([^\n]+)\n\n(- [^\n]+)", md)
    assert [(g.split(" [")[0], h) for g, h in heads] == [
        ("NVIDIA H100 80GB HBM3", "- None: no cell has values on two legs here (legs: 0.29), so nothing was compared. "
         "The values are in Full data; outcomes are in Coverage and Failure attribution."),
        ("NVIDIA H200", "- None: no cell has values on two legs here (legs: 0.18, 0.26), so nothing was compared. "
         "The values are in Full data; outcomes are in Coverage and Failure attribution.")]
    assert "No change detected" not in md
    # with a value on both legs the ratio exists again: a single pass says why it is no finding
    write_result(tmp_path / "one-side", "0.18", "gemma-4", {"mixed": 8000.0}, machine=h200, attempt=2)
    proc = run_cli("report", str(tmp_path / "one-side"), "--out", str(tmp_path / "report2"))
    assert proc.returncode == 0, proc.stderr
    head = (tmp_path / "report2" / "REPORT.md").read_text().split("## Headline findings")[1].split("## Full data")[0]
    assert "None can be stated: fewer than 3 process repeats" in head


def test_report_writes_every_artefact_in_seed_order(tmp_path):
    h = arch_results(tmp_path / "h200", H200, "NVIDIA H200", skip_glm=True, fail_gemma18=True)
    b = arch_results(tmp_path / "b200", B200, "NVIDIA B200")
    out_dir = tmp_path / "report"
    proc = run_cli("report", str(h), "--other", str(b), "--names", "H200,B200", "--out", str(out_dir))
    assert proc.returncode == 0, proc.stderr
    md = (out_dir / "REPORT.md").read_text()
    sections = ["## Coverage", "## Headline findings", "## Full data", "## What transfers",
                "## Failure attribution", "## What is controlled", "## Runtime stack per leg",
                "## Known limitations", "## Where the numbers come from"]
    positions = [md.index(s) for s in sections]
    assert positions == sorted(positions)
    headings = [ln.lstrip("#").strip() for ln in md.splitlines() if ln.startswith("#")]
    assert len(headings) == len(set(headings)), [h for h in headings if headings.count(h) > 1]
    assert "The denominator is 3, not 4" in md and "No dispersion" in md
    # single passes: even the 1.53x lead is no finding; the headline says why, the full data keeps it
    head = md.split("## Headline findings")[1].split("## Full data")[0]
    assert "None can be stated" in head and "1.53x" not in head
    assert "1.53x (1 pass, no verdict)" in md.split("## Full data")[1]
    for name in ("coverage", "throughput", "latency", "cross_arch", "controls", "stacks"):
        assert (out_dir / "tables" / f"{name}.csv").stat().st_size > 0
    data = json.loads((out_dir / "report.json").read_text())
    assert set(data["tables"]) >= {"throughput", "cross_arch"}
    html = (out_dir / "index.html").read_text()
    assert "<img src='plots/cross-arch.png'" in html and "<table>" in html
    png = (out_dir / "plots" / "cross-arch.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24])[0] > 100
    assert (out_dir / "plots" / "ratios.png").is_file()  # one ratio figure for the one group


class _PageText(__import__("html.parser").parser.HTMLParser):
    """index.html as a reader sees it: the tables' cell text and the images it asks for."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None


def markdown_tables(md: str) -> list[list[list[str]]]:
    tables, cur = [], None
    for line in md.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if cur is None:
                cur = []
                tables.append(cur)
            cur.append(cells)
        elif not line.startswith("|---"):
            cur = None
    return tables


def mixed_machines_report(tmp_path):
    """The mixed case of issue 16: a CPU run and an H200 run reported together; returns the report dir."""
    cpu, gpu = {"cpu_model": "AMD EPYC 7B13"}, {"gpus": [{"name": "NVIDIA H200", "clocks_locked": False}]}
    for leg, v in (("0.28-cpu", 2000.0), ("0.29-cpu", 1700.0)):
        write_result(tmp_path / "cpu-run", leg, "tiny-llama-2L", {"mixed": v}, sha="cpu-table", machine=cpu)
    write_result(tmp_path / "h200-run", "0.26-h200", "meta-llama/Llama-3.1-8B-Instruct", {"mixed": 9850.0},
                 sha="gpu-table", machine=gpu)
    write_result(tmp_path / "h200-run", "0.26-h200", "mistralai/Mixtral-8x7B-Instruct-v0.1", {}, status="SKIP",
                 skip_reason="needs 2 GPUs, this machine has 1", sha="gpu-table", machine=gpu, model_index=1)
    out = tmp_path / "rep"
    proc = run_cli("report", str(tmp_path / "cpu-run"), str(tmp_path / "h200-run"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_report_of_two_machines_keeps_each_group_apart_and_html_matches_markdown(tmp_path):
    out = mixed_machines_report(tmp_path)
    md = (out / "REPORT.md").read_text()
    title = md.splitlines()[0]
    assert "AMD EPYC 7B13" in title and "NVIDIA H200" in title
    assert "28/26" not in md and "26/28" not in md and "| 29/28 |" in md  # ratios only within a group
    cpu_part = md.split("## AMD EPYC 7B13 · table t")[1].split("## NVIDIA H200 · table t")[0]
    assert "Mixtral" not in cpu_part  # the CPU table never contained it: not "skipped" there
    assert "| 0.28-cpu | 1/1 | — | — | — |" in cpu_part
    headings = [ln for ln in md.splitlines() if ln.startswith("#")]
    assert len(headings) == len(set(headings)), [h for h in headings if headings.count(h) > 1]
    assert "clocks not locked" in md
    # the browser's view: every image the page asks for exists as a PNG; its tables are REPORT.md's
    page = _PageText()
    page.feed((out / "index.html").read_text())
    assert page.images and all((out / src).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for src in page.images)
    assert len(page.images) == len({p.name for p in (out / "plots").iterdir()})
    assert page.tables == markdown_tables(md)


@pytest.mark.browser
def test_report_renders_in_a_real_headless_browser_with_its_plots_and_the_markdown_tables(tmp_path):
    """index.html as a reader's browser shows it (Debian's chromium, headless): every plot loads
    (a broken <img> has naturalWidth 0), the rendered tables are REPORT.md's cell for cell, no
    heading repeats, and a full-page screenshot is a PNG of the page's size."""
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium on this CI machine; `make test` installs it (make browser)")
        pytest.skip("no chromium; `make browser` installs it")
    out = mixed_machines_report(tmp_path)
    md = (out / "REPORT.md").read_text()
    with Chromium(tmp_path / "profile") as browser:
        browser.render(out / "index.html")
        images, tables = browser.evaluate(PAGE_IMAGES), browser.evaluate(PAGE_TABLES)
        headings = browser.evaluate(PAGE_HEADINGS)
        items, paragraphs = browser.evaluate(PAGE_LIST_ITEMS), browser.evaluate(PAGE_PARAGRAPHS)
        width, height = browser.screenshot(tmp_path / "page.png")
        (out / "broken.html").write_text("<img src='plots/none.png'>")
        browser.render(out / "broken.html")
        broken = browser.evaluate(PAGE_IMAGES)
    plots = sorted(p.name for p in (out / "plots").iterdir())
    assert sorted(i["src"].removeprefix("plots/") for i in images) == plots and plots
    assert all(i["complete"] and i["width"] > 100 and i["height"] > 100 and i["shown"] > 100 for i in images), images
    assert broken[0]["width"] == 0  # the check above can fail: a missing plot reads as width 0
    assert tables == markdown_tables(md) and len(tables) >= 4
    assert len(headings) == len(set(headings)), headings
    # REPORT.md's lists are lists on the page, not paragraphs that start with a literal "- "
    md_items = [ln for ln in md.splitlines() if re.match(r"^(- |\d+\. )", ln)]
    assert len(items) == len(md_items) > 0 and not [p for p in paragraphs if re.match(r"^(- |\d+\. )", p)]
    png = (tmp_path / "page.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (width, height)
    assert width >= 1280 and height > 900  # the whole page, not the viewport
