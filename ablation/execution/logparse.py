"""Read a task's run.log: what vLLM chose (backend, KV cache, scheduling) and why it died.

vLLM reports these facts only in its log, in wording that has been stable
across the releases we run; each pattern below is anchored on that wording.
"""

from __future__ import annotations

import re
import signal

from ablation.results.record import Cause

_KV_TOKENS = re.compile(r"KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_BACKEND = re.compile(r"Using (?:AttentionBackendEnum\.)?([A-Z][A-Z0-9_]+) (?:attention )?backend")
_CHUNKED = re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
_ENGINE_VERSION = re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\)")
# The last line of a Python traceback: "SomeError: message", possibly behind a
# vLLM process prefix "(EngineCore pid=12) " or a logger prefix "ERROR ... ] ".
_EXC_LINE = re.compile(
    r"^(?:\(\w+(?: \w+)* pid=\d+\) )?(?:ERROR [^\]]*\] )?"
    r"((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning))(?:: (.*))?$"
)
# Wrappers that only say "see above": the cause is an earlier exception.
_WRAPPERS = ("Engine core initialization failed", "WorkerProc initialization failed", "see stack trace")
# A vLLM release meeting a library release it was not written for: the model and the engine are
# each fine, the pair is not, and pinning the library fixes it -- a `dependency` failure, not
# `runtime-crash` (what the exception's type alone would say) and not `unsupported-model`.
# Named one by one (lowercase, matched in the signature), each with where it was seen.
_VERSION_SKEW = (
    # transformers 5.17.0 raises it (a RuntimeError) when a per-layer attribute of a heterogeneous
    # config is read globally; vLLM 0.26 reads gemma-4's config.head_dim directly, and with
    # transformers 5.14.1 the same model runs (shared/seeds/h200-vllm-ablation-report.txt,
    # "gemma-4-26B: two different failures", H200 and B200; stacks/0.26*.yaml's override).
    "ambiguousglobalperlayerattributeerror",
)


def engine_facts_from_log(text: str) -> dict:
    facts: dict = {}
    if m := _KV_TOKENS.search(text):
        facts["kv_cache_tokens_logged"] = int(m.group(1).replace(",", ""))
    if m := _CONCURRENCY.search(text):
        facts["max_concurrency"] = float(m.group(2))
        facts["max_concurrency_tokens_per_request"] = int(m.group(1).replace(",", ""))
    backends = sorted(set(_BACKEND.findall(text)))
    facts["attention_backend"] = ",".join(backends) if backends else None
    if m := _CHUNKED.search(text):
        facts["chunked_prefill_max_num_batched_tokens"] = int(m.group(1))
    if m := _ENGINE_VERSION.search(text):
        facts["engine_version_logged"] = m.group(1)
    return facts


def _classify(signature: str) -> str:
    s = signature.lower()
    if "out of memory" in s or "outofmemoryerror" in s or "memoryerror" in s:
        return "oom"
    if any(skew in s for skew in _VERSION_SKEW):
        return "dependency"
    if (s.startswith(("importerror", "modulenotfounderror")) or "no module named" in s or "has no attribute" in s
            or "could not load this library" in s or "cannot open shared object" in s or "undefined symbol" in s):
        return "dependency"
    if "model type" in s or "not supported" in s or "unsupported" in s or "does not recognize" in s:
        return "unsupported-model"
    if "cuda error" in s or "illegal memory access" in s or "signal" in s or "segmentation" in s:
        return "runtime-crash"
    return "runtime-crash"


def error_signature(text: str) -> str | None:
    """The most specific exception line in the log: the root cause, not the wrapper.

    pydantic's ValidationError puts the reason on the next, indented line
    ("1 validation error for ModelConfig" / "  Value error, ... model type `gemma4` ..."),
    so an indented continuation line is part of the signature."""
    lines = text.splitlines()
    candidates = []
    for i, line in enumerate(lines):
        m = _EXC_LINE.match(line.strip())
        if not m or m.group(1).endswith("Warning"):
            continue
        exc, msg = m.group(1), (m.group(2) or "").strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if nxt[:1].isspace() and nxt.strip() and not nxt.strip().startswith(("File ", "^", "~")):
            msg = f"{msg} {nxt.strip()}".strip()
        candidates.append(f"{exc}: {msg}" if msg else exc)
    specific = [c for c in candidates if not any(w in c for w in _WRAPPERS)]
    chosen = (specific or candidates or [None])[-1]
    return chosen[:300] if chosen else None


def attribute_failure(log_text: str, exit_code: int | None, timed_out: bool) -> Cause:
    if timed_out:
        return Cause.of("timeout", "timeout: process group killed")
    sig = error_signature(log_text)
    if exit_code is not None and exit_code < 0:
        name = signal.Signals(-exit_code).name if -exit_code in signal.Signals._value2member_map_ else str(-exit_code)
        return Cause.of("runtime-crash", f"killed by {name}" + (f" after {sig}" if sig else ""))
    if sig:
        return Cause.of(_classify(sig), sig)
    return Cause.of("harness-error", f"exit code {exit_code} with no exception in the log")
