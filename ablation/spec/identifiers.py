"""Every identifier that becomes a path component, a task id, an environment name or a table cell.

Leg names, run ids, model ids, variant names, environment names and patch names enter from
files and options a user wrote; each is checked here, once, before it is joined to a path,
put in a shell line or a Markdown table. The rules return the value or raise ValueError
(pydantic turns that into `<file>: field '<field>': <why>`; the CLI calls `check` for options).

A model id keeps the mapping kept results use ('org/name' -> folder 'org__name'); ids that
the mapping could not turn into a safe folder name of their own are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ablation.errors import AblationError

MAX_LEN = 100
# Ranges of the numbers in a scenario table: beyond them a value is a typo, not a workload.
MAX_TOKENS = 10_000_000  # a prompt or output length, max_model_len
MAX_COUNT = 10_000_000  # prompts in a throughput run, a latency batch
MAX_ITERS = 10_000
MAX_GPUS = 4096  # tp, min_gpus

# Leg names are stack file stems and venv folder names (<leg>+<variant>), so no '+' and no
# leading '.': neither '.' nor '..' nor a hidden name can be a leg.
_LEG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Run ids: folder names under --results; '@' joins a run id and a Ray architecture.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]*")
_VARIANT = re.compile(r"[a-z0-9][a-z0-9._-]*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A model id: 'name' or 'org/name' (Hugging Face's spelling), each part a safe folder name.
_MODEL_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _length(value: str, what: str) -> None:
    if not value:
        raise ValueError(f"an empty {what} is not allowed")
    if len(value) > MAX_LEN:
        raise ValueError(f"{what} of {len(value)} characters; at most {MAX_LEN}")


def _shown(value: str) -> str:
    """The value as it can be printed on one line (control characters escaped, long ones cut)."""
    text = ascii(value)[1:-1] if not value.isprintable() else value
    return text if len(text) <= 60 else text[:57] + "..."


def _matching(value: str, what: str, pattern: re.Pattern, why: str) -> str:
    """`value` if it is a non-empty, not over-long full match of `pattern`; else ValueError(`why`, with
    the value shown on one line in place of '{}')."""
    _length(value, what)
    if not pattern.fullmatch(value):
        raise ValueError(why.format(_shown(value)))
    return value


def leg_name(value: str) -> str:
    return _matching(value, "leg name", _LEG, "leg name '{}' is not a safe folder name: use letters, digits, "
                     "'.', '_' or '-', starting with a letter or digit")


def run_id(value: str) -> str:
    return _matching(value, "run id", _RUN_ID, "run id '{}' is not a folder name under --results: use letters, "
                     "digits, '.', '_', '-', '+' or '@', starting with a letter or digit (no '/', no '..')")


def variant_name(value: str) -> str:
    return _matching(value, "variant name", _VARIANT, "variant name '{}': use lowercase letters, digits, '.', "
                     "'_' or '-', starting with a letter or digit")


def env_name(value: str) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value) or len(value) > 200:
        raise ValueError(f"environment variable name '{_shown(str(value))}' is not a POSIX name "
                         "([A-Za-z_][A-Za-z0-9_]*)")
    return value


def env_names(env: dict[str, str]) -> dict[str, str]:
    for name, value in env.items():
        env_name(name)
        if "\0" in value:
            raise ValueError(f"the value of {name} holds a NUL character, which no environment can carry")
    return env


def model_id(value: str) -> str:
    _length(value, "model id")
    parts = value.split("/")
    if len(parts) > 2 or not all(_MODEL_PART.fullmatch(p) for p in parts):
        raise ValueError(f"model id '{_shown(value)}' is not NAME or ORG/NAME with letters, digits, '.', '_' "
                         "or '-' (each part starting with a letter or digit); it names a results folder")
    return value


def workload_name(value: str) -> str:
    """A workload's name: a column of the tables, a key of results.json."""
    return _matching(value, "workload name", _MODEL_PART, "workload name '{}': use letters, digits, '.', '_' "
                     "or '-', starting with a letter or digit")


def model_folder(value: str) -> str:
    """The folder of a model's results: 'org/name' -> 'org__name' (the mapping kept results use)."""
    return value.replace("/", "__")


def unique_model_folders(ids: Iterable[str]) -> None:
    """Two ids whose folders are one folder (or differ only in case, one folder on macOS) would
    share results and task ids: refused."""
    seen: dict[str, str] = {}
    for mid in ids:
        key = model_folder(mid).lower()
        if key in seen and seen[key] != mid:
            raise ValueError(f"model ids '{seen[key]}' and '{mid}' would share the results folder "
                             f"'{model_folder(mid)}'; rename one")
        seen[key] = mid


def patch_name(value: str) -> str:
    """A patch named in a stack: a relative path inside the patches directory."""
    _length(value, "patch name")
    parts = value.split("/")
    if value.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in value \
            or not value.isprintable():
        raise ValueError(f"patch '{_shown(value)}' must be a file name inside the patches directory "
                         "(no absolute path, no '..')")
    return value


def check(rule, value: str, option: str) -> str:
    """A rule applied to a command-line option: one error line naming the option."""
    try:
        return rule(value)
    except ValueError as exc:
        raise AblationError(f"{option}: {exc}") from None
