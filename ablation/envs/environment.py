"""Every rule about the environment a leg's processes see, in one place.

A build, a probe and a task each start processes inside a leg's venv; none may inherit the
runner's own Python settings, every vLLM process of a leg gets its own caches, and a task's
environment is composed in one fixed order (stack `env`, then the scenario's `engine_env`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# The runner's own Python settings, which no process of a leg may inherit: on the GPU
# machine the runner gets pydantic through PYTHONPATH, and a pip or probe that saw it
# counted pydantic as present, so it was not overlaid and vLLM then failed to import it.
RUNNER_PYTHON_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")


def without_runner_python(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in RUNNER_PYTHON_VARS}


def leg_env() -> dict[str, str]:
    """The environment for processes that build or inspect a leg."""
    return without_runner_python(dict(os.environ))


# The folders inside a leg's venv that hold its compile and JIT caches: what `ablation stacks
# caches export/import` carries between machines (envs.caches), and nothing else.
VLLM_CACHE, JIT_CACHE = "vllm-cache", "jit-cache"
LEG_CACHE_DIRS = (VLLM_CACHE, JIT_CACHE)


def leg_process_env(venv: Path) -> dict[str, str]:
    """What every vLLM process of a leg gets on top of its stack's `env`.

    Compiled-graph and JIT caches are per leg: one leg must never reuse another's
    artifacts. FlashInfer otherwise builds its JIT kernels under ~/.cache/flashinfer
    (seen on the H200: ~95 s of a first start-up) and Triton under ~/.triton, both
    shared by every leg. Keeping them all in the venv is also what lets `ablation stacks caches`
    carry them to the next machine (envs.caches)."""
    return {
        "VLLM_CACHE_ROOT": str(venv / VLLM_CACHE),
        "FLASHINFER_WORKSPACE_BASE": str(venv / JIT_CACHE),
        "TRITON_CACHE_DIR": str(venv / JIT_CACHE / "triton"),
        "CUDA_CACHE_PATH": str(venv / JIT_CACHE / "cuda"),  # the driver's PTX JIT cache (else ~/.nv)
        "PYTHONUNBUFFERED": "1",
    }


def task_env(base: Mapping[str, str], stack_env: Mapping[str, str], extra_env: Mapping[str, str],
             engine_env: Mapping[str, str], venv: Path) -> dict[str, str]:
    """The harness's environment. It must not see the runner's own packages (nor a stack's
    PYTHONPATH); the table's engine_env comes last: it is part of the scenario, identical on every leg."""
    env = without_runner_python({**base, **stack_env, **extra_env, **engine_env})
    env.update(leg_process_env(venv))
    env.pop("VIRTUAL_ENV", None)
    env["ABLATION_RUNNER_PID"] = str(os.getpid())  # die_with_parent checks it is still its parent
    return env
