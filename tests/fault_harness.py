"""FAULT-INJECTION HARNESS: a fake engine for the executor's failure tests only.

It speaks the real harness's file protocol (task JSON in, result JSON out) but
misbehaves on purpose, chosen by the task's model id `fault/<mode>`. It never
stands in for vLLM in any test of measurement.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# The declared protocol, as the real harness imports it (this process runs in a leg's venv,
# where the runner's packages do not exist).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ablation" / "harness"))
import protocol  # noqa: E402


def result(task, value=100.0, passed=True):
    workloads = {w["name"]: {"kind": w["kind"], "value": value, "unit": "tok/s",
                             "total_output_tokens": 1, "expected_output_tokens": 1}
                 for w in task["workloads"]}
    failed = [] if passed else ["mixed: output tokens 3 != requested 4"]
    return protocol.result_document(task, workloads, failed, engine={"kv_cache_tokens": 1000})


def write(task, data):
    with open(task["output_path"], "w") as f:
        f.write(data if isinstance(data, str) else json.dumps(data))


def main():
    task = protocol.read_task(sys.argv[1])
    mode = task["model"]["id"].split("/", 1)[1]
    print(f"[fault-harness] mode {mode}", flush=True)
    if mode == "ok":
        write(task, result(task))
    elif mode.startswith("slow"):
        hang = mode in os.environ.get("FAULT_HANG_MODES", "").split(",")
        if hang:  # like vLLM: an engine child in the same process group, which outlives a killed harness
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            with open(os.path.join(os.path.dirname(task["output_path"]), "child.pid"), "w") as f:
                f.write(str(child.pid))
        time.sleep(3600 if hang else float(os.environ.get("FAULT_SLOW_S", "4")))
        write(task, result(task))
    elif mode == "versioned":
        # A metric the tests control: the value is looked up by the version of `six`
        # installed in this leg's venv, with 0.5% jitter so repeats have dispersion.
        import random
        from importlib import metadata

        table = dict(x.split(":") for x in os.environ["FAULT_VALUES"].split(","))
        value = float(table[metadata.version("six")]) * (1 + random.uniform(-0.005, 0.005))
        write(task, result(task, value=value))
    elif mode == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif mode == "hang":
        # Like vLLM: a worker child in the same process group, then the parent hangs.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        with open(os.path.join(os.path.dirname(task["output_path"]), "child.pid"), "w") as f:
            f.write(str(child.pid))
        time.sleep(3600)
    elif mode == "env-dump":
        # What vLLM's worker processes would inherit: a child reports its own environment.
        code = "import json, os; print(json.dumps(dict(os.environ)))"
        child_env = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                              check=True).stdout)
        with open(os.path.join(os.path.dirname(task["output_path"]), "env.json"), "w") as f:
            json.dump({"harness": dict(os.environ), "worker": child_env}, f)
        write(task, result(task))
    elif mode == "compile-cache":
        # Like vLLM's torch.compile cache: an artifact under the leg's VLLM_CACHE_ROOT, written on a
        # miss and read on a hit; the harness says which (in its environment, as vLLM's log would).
        art = Path(os.environ["VLLM_CACHE_ROOT"]) / "torch_compile_cache" / "fake-hash" / "rank_0" / "graph.py"
        hit = art.is_file() and art.read_text() == "compiled\n"
        if not hit:
            art.parent.mkdir(parents=True, exist_ok=True)
            art.write_text("compiled\n")
        write(task, protocol.result_document(task, result(task)["workloads"], [],
                                             environment={"compile_cache": "hit" if hit else "miss"}))
    elif mode == "garbage":
        write(task, "{this is not json")
    elif mode == "failed-checks":
        write(task, result(task, passed=False))
    elif mode == "unknown-schema":  # a harness from another protocol version
        write(task, {**result(task), "schema": "vllm-ablation/harness/99"})
    elif mode == "nan":
        write(task, json.dumps(result(task)).replace("100.0", "NaN"))
    elif mode == "cutlass":
        raise AttributeError("module 'cutlass.cute.core' has no attribute 'ThrMma'")
    elif mode == "oom":
        print("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>", flush=True)
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
        sys.exit(1)
    elif mode == "exit0-nothing":
        pass
    else:
        sys.exit(f"unknown fault mode {mode}")


if __name__ == "__main__":
    main()
