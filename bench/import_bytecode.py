"""What the build-time bytecode saves at each task's start: `from vllm import LLM, SamplingParams`
in a leg venv with its .pyc files against the same venv made to compile from source.

Interleaved pairs in one run (this machine is noisy; the ratio is the evidence, not the seconds).
"Without" points PYTHONPYCACHEPREFIX at an empty directory and sets PYTHONDONTWRITEBYTECODE, so
Python finds no .pyc and writes none: what every task paid before the builder compiled bytecode.

    python bench/import_bytecode.py [--leg 0.29-cpu] [--pairs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMPORT = "from vllm import LLM, SamplingParams"


def timed_import(python: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([str(python), "-c", IMPORT], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leg", default="0.29-cpu")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--venv-root", default=os.environ.get("ABLATION_VENV_ROOT",
                                                          str(Path.home() / ".cache/vllm-ablation/venvs")))
    args = ap.parse_args()
    python = Path(args.venv_root) / args.leg / "bin" / "python"
    if not python.exists():
        print(f"no venv for {args.leg} at {python.parent.parent}: run `ablation stacks build {args.leg}`", file=sys.stderr)
        return 1
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "VIRTUAL_ENV", "PYTHONPATH")}
    base["PYTHONDONTWRITEBYTECODE"] = "1"
    with_pyc, without_pyc = [], []
    with tempfile.TemporaryDirectory() as empty_prefix:
        timed_import(python, base)  # page cache warm for both sides alike
        for i in range(args.pairs):
            order = [("with", base), ("without", {**base, "PYTHONPYCACHEPREFIX": empty_prefix})]
            for name, env in order if i % 2 == 0 else order[::-1]:
                t = timed_import(python, env)
                (with_pyc if name == "with" else without_pyc).append(t)
                print(f"pair {i + 1}: {name:7s} .pyc  {t:5.1f} s", flush=True)
    ratios = [b / a for a, b in zip(with_pyc, without_pyc)]
    print(f"\n{args.leg}: `{IMPORT}`, {args.pairs} interleaved pairs, {os.cpu_count()} CPUs")
    print(f"  with .pyc     median {statistics.median(with_pyc):5.1f} s  (min {min(with_pyc):.1f}, max {max(with_pyc):.1f})")
    print(f"  without .pyc  median {statistics.median(without_pyc):5.1f} s  (min {min(without_pyc):.1f}, max {max(without_pyc):.1f})")
    print(f"  without/with  median {statistics.median(ratios):.2f}x  (per pair: {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
