"""Default locations, all under the user cache so they survive between CI runs on one machine."""

from __future__ import annotations

import os
from pathlib import Path


def cache_path(env_var: str, *parts: str) -> Path:
    """$env_var if set, else $XDG_CACHE_HOME (or ~/.cache)/vllm-ablation/<parts>."""
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache.joinpath("vllm-ablation", *parts)
