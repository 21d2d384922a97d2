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


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with one key twice (the last one would silently win)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:  # the mapping's own keys (a '<<' merge may be overridden)
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                    seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:  # an unhashable key: the base class reports it
                    continue
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key '{key}' (first at line {first})", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path):
    """The YAML document in `path`, or one AblationError line (missing, unreadable, not UTF-8,
    malformed, a key given twice)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AblationError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise AblationError(f"{path}: is a directory; give a YAML file") from None
    except UnicodeDecodeError as exc:
        raise AblationError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise AblationError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "unknown line"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise AblationError(f"{path}: malformed YAML at {where}: {problem}; fix the syntax") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. a timestamp out of range
        raise AblationError(f"{path}: malformed YAML: {str(exc).splitlines()[0][:200]}") from None


def load_yaml_model(path: Path, model: type[M], defaults: dict | None = None,
                    docs: str = "docs/stacks.md or docs/scenarios.md") -> M:
    """Parse `path` as YAML and validate it as `model`; `defaults` fill absent keys; `docs` is where
    an unknown field's message points for the field list."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise AblationError(f"{path}: (top level): expected a mapping of fields, got {type(data).__name__}")
    merged = {**(defaults or {}), **data}
    try:
        return model.model_validate(merged)
    except RecursionError:
        raise AblationError(f"{path}: nested too deeply to be a {model.__name__}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = f"unknown field; check the spelling against the field list in {docs}"
        raise AblationError(f"{path}: field '{_field_path(err['loc'])}': {msg}{more}") from None
