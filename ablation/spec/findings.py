"""A seed report's findings, as a file: what `ablation report --seed-findings` checks our results against.

A findings file (scenarios/seed-findings-h200.yaml) holds what a published report claimed,
transcribed once and validated here: ratios between two of its legs for one model and workload
(with the two values and the number of passes they came from), and expected outcomes per leg
(PASS, or FAIL with a cause). The seed's leg names ("0.18") are mapped to this tool's legs
(`legs:`), so one file serves results with other leg names. Bad input is one
`<file>: field '<field>': <why>` line, as for stack and scenario files.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ablation.spec import identifiers
from ablation.util.yamlio import load_yaml_model

RATIO_TOLERANCE = 0.02  # the seed's ratio and its two (rounded) values agree to 2%, or the file has a typo

Leg = Annotated[str, AfterValidator(identifiers.leg_name)]
ModelId = Annotated[str, AfterValidator(identifiers.model_id)]
WorkloadName = Annotated[str, AfterValidator(identifiers.workload_name)]


def _cell_text(value: str) -> str:
    """Free text that becomes a table cell: one printable line, no '|'."""
    if not value.strip() or "|" in value or not value.isprintable() or len(value) > 200:
        raise ValueError("must be one printable line of at most 200 characters without '|'")
    return value


Text = Annotated[str, AfterValidator(_cell_text)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class SeedMeasure(BaseModel):
    """What the seed printed for one ratio: the ratio, the two values it is made of, and from how many passes."""

    model_config = ConfigDict(extra="forbid")

    ratio: Positive
    baseline: Positive = Field(description="the baseline leg's value, as the seed's table prints it")
    candidate: Positive = Field(description="the candidate leg's value, as the seed's table prints it")
    passes: int = Field(ge=1, description="timed passes behind each value (the seed: 1, no repeats)")


class RatioFinding(BaseModel):
    """One ratio the seed claims: candidate over baseline (throughput) or baseline over candidate
    (latency, a speedup), so > 1 is better either way, as in this tool's tables."""

    model_config = ConfigDict(extra="forbid")

    group: Text = Field(description="the seed's heading the finding belongs to")
    model: ModelId
    workload: WorkloadName
    kind: Literal["throughput", "latency"] = "throughput"
    baseline: Leg = Field(description="the seed's name of the older leg, e.g. '0.18'")
    candidate: Leg = Field(description="the seed's name of the newer leg, e.g. '0.26'")
    seed: SeedMeasure

    @model_validator(mode="after")
    def _consistent(self) -> "RatioFinding":
        if self.baseline == self.candidate:
            raise ValueError("baseline and candidate are the same leg")
        s = self.seed
        implied = s.candidate / s.baseline if self.kind == "throughput" else s.baseline / s.candidate
        if abs(math.log(implied / s.ratio)) > math.log1p(RATIO_TOLERANCE):
            raise ValueError(f"seed.ratio {s.ratio} disagrees with its values ({s.baseline} -> {s.candidate} gives "
                             f"{implied:.3f}); check the transcription")
        return self


class Expectation(BaseModel):
    """The outcome the seed reports for the model on one leg (and variant)."""

    model_config = ConfigDict(extra="forbid")

    leg: Leg = Field(description="the seed's leg name")
    variant: Annotated[str, AfterValidator(identifiers.variant_name)] | None = Field(
        None, description="the override variant the seed ran it in (none: the leg's base venv)")
    status: Literal["PASS", "FAIL"]
    cause: Text | None = Field(None, description="FAIL: text the failure's signature contains")
    seed: Text = Field(description="what the seed reports, in its words")
    workload: WorkloadName | None = Field(None, description="PASS: the workload whose value the seed gives")
    value: Positive | None = Field(None, description="PASS: the seed's value for that workload")

    @model_validator(mode="after")
    def _shape(self) -> "Expectation":
        if self.status == "FAIL" and self.cause is None:
            raise ValueError("an expected FAIL names its cause (text its signature contains)")
        if self.status == "PASS" and self.cause is not None:
            raise ValueError("an expected PASS has no cause")
        if (self.workload is None) != (self.value is None):
            raise ValueError("give 'workload' and 'value' together")
        return self


class OutcomeFinding(BaseModel):
    """The seed's story of one model across legs: which ran, which failed and why."""

    model_config = ConfigDict(extra="forbid")

    group: Text
    model: ModelId
    expect: list[Expectation] = Field(min_length=1)

    @field_validator("expect")
    @classmethod
    def _unique(cls, v: list[Expectation]) -> list[Expectation]:
        seen = [(e.leg, e.variant) for e in v]
        if len(seen) != len(set(seen)):
            raise ValueError("one expectation per (leg, variant)")
        return v


class SeedTableRef(BaseModel):
    """The seed's scenario table, whose rows the report lists with what these results measured of each."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, description="the scenario table, relative to the findings file")
    values: str | None = Field(None, min_length=1, description="the seed's Full data tables as TSV (one row per "
                               "table row: its values per leg and printed ratios), relative to the findings file")
    leave_out: dict[ModelId, Text] = Field(
        default_factory=dict, description="models of the table the seed report has no rows for -> why")


class SeedFindings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Text
    source: Text = Field(description="the report the findings are transcribed from")
    gpu: Text | None = Field(None, description="the GPU model the seed's numbers come from, as nvidia-smi names it "
                             "(e.g. 'NVIDIA H200'); a result recorded on another says so in 'differences in data'")
    legs: dict[Leg, Leg] = Field(min_length=1, description="the seed's leg name -> this tool's leg name")
    seed_requests: dict[WorkloadName, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="requests per throughput workload in the seed's run")
    ratios: list[RatioFinding] = Field(default_factory=list)
    outcomes: list[OutcomeFinding] = Field(default_factory=list)
    table: SeedTableRef | None = Field(None, description="the seed's scenario table: adds the 'Seed rows' tables")

    @field_validator("legs")
    @classmethod
    def _one_to_one(cls, v: dict[str, str]) -> dict[str, str]:
        if len(set(v.values())) != len(v):
            raise ValueError("two seed legs map to one leg")
        return v

    @field_validator("ratios")
    @classmethod
    def _ratio_legs(cls, v: list[RatioFinding], info: ValidationInfo) -> list[RatioFinding]:
        legs = info.data.get("legs") or {}
        keys = []
        for i, f in enumerate(v):
            for field in ("baseline", "candidate"):
                if legs and getattr(f, field) not in legs:
                    raise ValueError(f"ratios.{i}.{field}: leg '{getattr(f, field)}' is not under 'legs'")
            key = (f.model, f.workload, f.baseline, f.candidate)
            if key in keys:
                raise ValueError(f"ratios.{i}: the same finding as ratios.{keys.index(key)}")
            keys.append(key)
        return v

    @field_validator("outcomes")
    @classmethod
    def _outcome_legs(cls, v: list[OutcomeFinding], info: ValidationInfo) -> list[OutcomeFinding]:
        legs = info.data.get("legs") or {}
        for i, o in enumerate(v):
            for j, e in enumerate(o.expect):
                if legs and e.leg not in legs:
                    raise ValueError(f"outcomes.{i}.expect.{j}.leg: leg '{e.leg}' is not under 'legs'")
        return v

    @model_validator(mode="after")
    def _some(self) -> "SeedFindings":
        if not self.ratios and not self.outcomes:
            raise ValueError("no findings: give 'ratios' or 'outcomes'")
        return self

    def leg(self, seed_leg: str) -> str:
        return self.legs[seed_leg]


def load_findings(path: Path) -> SeedFindings:
    return load_yaml_model(path, SeedFindings, docs="docs/comparer.md (seed findings) or ablation/spec/findings.py")
