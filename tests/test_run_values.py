"""scripts/run-values: the per-process values and one-cell ratios that measurement READMEs quote are
regenerated from the kept records, byte for byte. A change to the script or to the tool's statistics
that would alter a published values.txt fails here."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO

MEASURED = [  # (folder, run, model slug, old leg, new leg): runs of two legs whose values.txt the script wrote
    ("2026-12-07-session14-h100-whisper", "s14-h100-whisper-29-26", "openai__whisper-large-v3", "0.26-h200", "0.29-h200"),
    ("2026-12-07-session15-h100-qwen2vl-rest", "s15-h100-qwen2vl-rest", "Qwen__Qwen2-VL-7B-Instruct",
     "0.26-h200", "0.29-h200"),
    ("2026-12-07-session16-h100-omni-audio-26-18", "s16-h100-omni-audio", "Qwen__Qwen2.5-Omni-7B",
     "0.18-h200", "0.26-h200"),
    ("2026-12-07-session18-h100-qwen3vl-29-26", "s18-h100-qwen3vl", "Qwen__Qwen3-VL-8B-Instruct",
     "0.26-h200", "0.29-h200"),
    ("2026-12-07-session19-h100-llama-26-18", "s19-h100-llama-26-18", "meta-llama__Llama-3.1-8B-Instruct",
     "0.18-h200", "0.26-h200"),
]


@pytest.mark.parametrize(("folder", "run", "slug", "old", "new"), MEASURED)
def test_values_txt_is_what_the_script_prints_from_the_kept_records(folder, run, slug, old, new):
    here = REPO / "docs" / "measurements" / folder
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "run-values"), str(here / "results" / run), slug,
                          old, new], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out == (here / "values.txt").read_text()


def test_a_leg_with_fewer_than_3_processes_gets_the_ratio_of_medians_and_no_verdict():
    here = REPO / "docs" / "measurements" / "2026-12-07-session15-h100-qwen2vl-rest"
    text = (here / "values.txt").read_text()
    assert "29/26 1.084x (ratio of medians), unrepeated: no verdict (n 3 / 2)" in text
    assert "interval" not in text


@pytest.mark.parametrize("args", [[], ["docs/measurements/2026-12-07-session14-h100-whisper/results/s14-h100-whisper-29-26",
                                       "no__such-model", "0.26-h200", "0.29-h200"]])
def test_bad_arguments_are_one_error_line_and_exit_2(args):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "run-values"), *args],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
