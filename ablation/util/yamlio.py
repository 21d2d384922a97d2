"""Load a YAML file into a pydantic model, turning every failure into one line.

Both stack and scenario files go through here, so a malformed file of either
kind yields the same shape of message: `<file>: <field>: <what is wrong>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ablation.errors import AblationError

M = TypeVar("M", bound=BaseModel)


def _field_path(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def load_yaml_model(path: Path, model: type[M], defaults: dict | None = None) -> M:
    """Parse `path` as YAML and validate it as `model`; `defaults` fill absent keys."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise AblationError(f"{path}: file not found") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "unknown line"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise AblationError(f"{path}: malformed YAML at {where}: {problem}; fix the syntax") from None
    if not isinstance(data, dict):
        raise AblationError(f"{path}: (top level): expected a mapping of fields, got {type(data).__name__}")
    merged = {**(defaults or {}), **data}
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling against the field list in docs/stacks.md or docs/scenarios.md"
        raise AblationError(f"{path}: field '{_field_path(err['loc'])}': {msg}{more}") from None
