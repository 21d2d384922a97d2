"""The scenario table: models x tensor-parallel degree x workloads.

One file is run byte-for-byte identically on every leg; the sha256 of its bytes
goes into every result so that two result sets can prove they measured the same
thing. Workload names follow the seed reports (mixed, long-context,
single-request, fixed-batch-32); their parameters live in the table, not in code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ablation.errors import AblationError
from ablation.spec import identifiers
from ablation.util.yamlio import load_yaml_model


class LengthRange(BaseModel):
    """Prompt lengths drawn uniformly from [min, max] with the scenario's seed."""

    model_config = ConfigDict(extra="forbid")

    min: int = Field(ge=1, le=identifiers.MAX_TOKENS)
    max: int = Field(ge=1, le=identifiers.MAX_TOKENS)

    @model_validator(mode="after")
    def _ordered(self) -> "LengthRange":
        if self.min > self.max:
            raise ValueError("min must not exceed max")
        return self


class ImageMedia(BaseModel):
    """One distinct synthetic RGB image per item (seeded noise), fed as a PIL image."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["image"]
    width: int = Field(ge=1, le=8192)
    height: int = Field(ge=1, le=8192)
    items_per_request: int = Field(1, ge=1, le=16)


class VideoMedia(BaseModel):
    """Synthetic uint8 frames (T, H, W, 3), with frame metadata where the model needs it."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["video"]
    frames: int = Field(ge=1, le=1024)
    width: int = Field(ge=1, le=4096)
    height: int = Field(ge=1, le=4096)
    fps: float = Field(2.0, gt=0, description="frame rate the metadata states (Qwen3-VL reads it)")
    items_per_request: int = Field(1, ge=1, le=16)


class AudioMedia(BaseModel):
    """Synthetic mono float32 audio at the model's own rate, fed as (array, sample_rate)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["audio"]
    seconds: float = Field(gt=0, le=3600)
    sample_rate: int = Field(16000, ge=1000, le=192000)
    items_per_request: int = Field(1, ge=1, le=16)


Media = Annotated[Union[ImageMedia, VideoMedia, AudioMedia], Field(discriminator="type")]
LABEL = Field(None, min_length=1, max_length=64,
              description="the name printed in tables (default: the workload key); lets one table hold "
                          "two workloads the seed names alike for different models")
MEDIA = Field(None, description="synthetic media per request (none: a text workload)")


class ThroughputWorkload(BaseModel):
    """Offline batch: all prompts submitted at once; reported as output tok/s."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["throughput"]
    num_prompts: int = Field(ge=1, le=identifiers.MAX_COUNT)
    input_len: LengthRange
    output_len: int = Field(ge=1, le=identifiers.MAX_TOKENS)
    num_iters: int = Field(1, ge=1, le=identifiers.MAX_ITERS, description="timed passes in one process; the median is reported")
    media: Media | None = MEDIA
    label: str | None = LABEL


class LatencyWorkload(BaseModel):
    """A fixed batch generated end to end, timed num_iters times; reported as ms/tok."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["latency"]
    batch_size: int = Field(ge=1, le=identifiers.MAX_COUNT)
    input_len: int = Field(ge=1, le=identifiers.MAX_TOKENS)
    output_len: int = Field(ge=1, le=identifiers.MAX_TOKENS)
    num_iters: int = Field(3, ge=1, le=identifiers.MAX_ITERS)
    num_iters_warmup: int = Field(1, ge=0, le=identifiers.MAX_ITERS)
    media: Media | None = MEDIA
    label: str | None = LABEL


Workload = Annotated[Union[ThroughputWorkload, LatencyWorkload], Field(discriminator="kind")]


class Requires(BaseModel):
    """What a machine must have; a scenario whose needs are unmet is SKIP, never FAIL."""

    model_config = ConfigDict(extra="forbid")

    platform: Literal["cpu", "cuda"] | None = None
    min_compute_capability: float | None = Field(None, ge=0, le=100, allow_inf_nan=False)
    min_gpus: int | None = Field(None, ge=0, le=identifiers.MAX_GPUS)
    min_gpu_memory_gib: float | None = Field(None, gt=0, le=2**20, allow_inf_nan=False,
                                             description="memory of each GPU (GiB), e.g. a model whose weights "
                                                         "need more than an 80 GB card")
    min_cpus: int | None = Field(None, ge=1, description="CPUs the task may run on (its affinity), e.g. for tp on CPU")
    reason: str | None = Field(None, description="why, in the words the SKIP line will use")


class ModelSource(BaseModel):
    """Where the weights come from: generated tiny model, or a local directory."""

    model_config = ConfigDict(extra="forbid")

    generate: Literal["tiny-llama", "tiny-qwen2-vl", "tiny-whisper", "tiny-qwen2.5-omni"] | None = Field(
        None, description="a model made here: tiny-llama (with weights) or a tiny multimodal config "
                          "in the real token-id space (no weights: load_format dummy)")
    seed: int = 0
    path: str | None = Field(None, description="local directory with config.json (relative to the table)")

    @model_validator(mode="after")
    def _one(self) -> "ModelSource":
        if (self.generate is None) == (self.path is None):
            raise ValueError("give exactly one of 'generate' or 'path'")
        return self


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    source: ModelSource
    tp: int = Field(1, ge=1, le=identifiers.MAX_GPUS)
    dtype: str = "auto"
    load_format: str = "auto"
    max_model_len: int | None = Field(None, ge=1, le=identifiers.MAX_TOKENS)
    engine_args: dict = Field(default_factory=dict, description="passed verbatim to vllm.LLM")
    engine_env: dict[str, str] = Field(default_factory=dict,
                                       description="environment for the harness and vLLM, the same on every leg "
                                                   "(e.g. VLLM_ENABLE_V1_MULTIPROCESSING); recorded with the spec")
    requires: Requires = Field(default_factory=Requires)
    workloads: list[str] = Field(min_length=1)
    timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False)

    _id = field_validator("id")(identifiers.model_id)
    _engine_env = field_validator("engine_env")(identifiers.env_names)

    @property
    def slug(self) -> str:
        """A directory name for the model: 'org/name' -> 'org__name' (ids are checked to be safe)."""
        return identifiers.model_folder(self.id)


class ScenarioTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    seed: int = 0
    timeout_s: float = Field(1800, gt=0, allow_inf_nan=False)
    workloads: dict[str, Workload] = Field(min_length=1)
    models: list[ModelSpec] = Field(min_length=1)

    @field_validator("workloads")
    @classmethod
    def _workload_names(cls, v: dict) -> dict:
        for name in v:
            identifiers.workload_name(name)
        return v

    @model_validator(mode="after")
    def _references(self) -> "ScenarioTable":
        ids = [m.id for m in self.models]
        if len(ids) != len(set(ids)):
            raise ValueError("model ids must be unique")
        identifiers.unique_model_folders(ids)
        for i, m in enumerate(self.models):
            for w in m.workloads:
                if w not in self.workloads:
                    raise ValueError(f"models.{i}.workloads: '{w}' is not defined under 'workloads'")
        return self

    def model(self, model_id: str) -> ModelSpec:
        for m in self.models:
            if m.id == model_id:
                return m
        raise AblationError(f"model '{model_id}' is not in scenario table '{self.name}'")


class ScenarioFile(BaseModel):
    path: Path
    table: ScenarioTable
    sha256: str


def load_scenarios(path: Path) -> ScenarioFile:
    table = load_yaml_model(path, ScenarioTable)
    return ScenarioFile(path=path, table=table, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
