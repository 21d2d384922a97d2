"""Turn a scenario's model source into a local directory vLLM can load."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from ablation.errors import AblationError
from ablation.modeldirs.mm_files import SYNTHESIS_VERSION, family_of, synthesize
from ablation.modeldirs.mm_tiny import GENERATORS, make_tiny_multimodal
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
    if src.generate in GENERATORS:
        if spec.load_format != "dummy":
            raise AblationError(f"{scenarios.path}: field 'models.{index}.load_format': {src.generate} has no "
                                "weights; set load_format: dummy")
        path = models_root / f"{src.generate}-seed{src.seed}"
        make_tiny_multimodal(src.generate, path, seed=src.seed)  # seconds; rewritten so a generator change shows
        return PreparedModel(path, model_digest(path), src.model_dump(exclude_none=True))
    path = Path(src.path)
    if not path.is_absolute():
        path = (scenarios.path.parent / path).resolve()
    if not (path / "config.json").is_file():
        raise AblationError(
            f"{scenarios.path}: field 'models.{index}.source.path': {path} has no config.json; "
            "point it at a model directory (weights may be omitted with load_format: dummy)"
        )
    if not (path / "tokenizer.json").is_file():
        config = _read_config(path / "config.json", f"{scenarios.path}: field 'models.{index}.source.path'")
        if family_of(config) is not None:
            try:
                path = _with_synthesized_files(path, config, models_root)
            except AblationError as exc:  # a config field the synthesis cannot use: name the model and file
                raise AblationError(f"{scenarios.path}: field 'models.{index}.source.path': {path}/{exc}") from None
    return PreparedModel(path, model_digest(path), src.model_dump(exclude_none=True))


def _read_config(path: Path, where: str) -> dict:
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AblationError(f"{where}: {path} is not readable JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise AblationError(f"{where}: {path} is not a JSON object")
    return config


def _with_synthesized_files(src_dir: Path, config: dict, models_root: Path) -> Path:
    """A multimodal config without a tokenizer: copy its files into the models cache beside a
    synthesized tokenizer and processor configs (the model's HF processor needs them). Nothing is
    written into the source directory; the copy's name carries the source's digest."""
    digest = model_digest(src_dir)
    out = models_root / f"{src_dir.name}-{digest[:12]}-mm{SYNTHESIS_VERSION}"
    stamp = out / "ABLATION_SYNTHESIZED.json"
    if stamp.is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for f in sorted(src_dir.iterdir()):
        if f.is_file():
            shutil.copy2(f, tmp / f.name)
    try:
        written = synthesize(tmp, config)
    except BaseException:
        shutil.rmtree(tmp)  # our own half-written copy
        raise
    (tmp / "ABLATION_SYNTHESIZED.json").write_text(json.dumps(
        {"source": str(src_dir), "source_digest": digest, "synthesis_version": SYNTHESIS_VERSION,
         "synthesized": written}, indent=2))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out
