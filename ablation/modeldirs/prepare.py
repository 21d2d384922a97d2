"""Turn a scenario's model source into a local directory vLLM can load."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ablation.errors import AblationError
from ablation.modeldirs.tiny_llama import make_tiny_llama, model_digest
from ablation.spec.scenarios import ModelSpec, ScenarioFile
from ablation.util.paths import cache_path


def default_models_root() -> Path:
    return cache_path("ABLATION_MODELS_ROOT", "models")


@dataclass(frozen=True)
class PreparedModel:
    path: Path
    digest: str
    source: dict


def prepare_model(spec: ModelSpec, scenarios: ScenarioFile, models_root: Path) -> PreparedModel:
    """Generate the tiny model once per seed, or check a given directory; return its digest."""
    src = spec.source
    index = scenarios.table.models.index(spec)
    if src.generate == "tiny-llama":
        path = models_root / f"tiny-llama-seed{src.seed}"
        stamp = path / "ABLATION_TINY_MODEL.json"
        if stamp.is_file() and json.loads(stamp.read_text()).get("seed") == src.seed:
            digest = model_digest(path)
        else:
            digest = make_tiny_llama(path, seed=src.seed, tool_owned=True)
        return PreparedModel(path, digest, src.model_dump(exclude_none=True))
    path = Path(src.path)
    if not path.is_absolute():
        path = (scenarios.path.parent / path).resolve()
    if not (path / "config.json").is_file():
        raise AblationError(
            f"{scenarios.path}: field 'models.{index}.source.path': {path} has no config.json; "
            "point it at a model directory (weights may be omitted with load_format: dummy)"
        )
    return PreparedModel(path, model_digest(path), src.model_dump(exclude_none=True))
