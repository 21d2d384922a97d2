"""A plain vLLM offline throughput measurement, written by hand, to check the harness against.

Run inside a leg's venv (it imports only vLLM and the standard library):

    <leg venv>/bin/python bench/fidelity_offline.py --model DIR --out fidelity.json

It does what `vllm bench throughput --dataset-name random` does for the `mixed`
workload (the same lengths: 1000 prompts of 32-1024 random token ids, 256 output
tokens each, ignore_eos), but shares no code with the harness: its own prompts,
its own timing, LLM.generate called directly. The ratio harness / this is the
harness's fidelity; it is printed by whoever compares the two JSON files.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--num-prompts", type=int, default=1000)
    ap.add_argument("--input-min", type=int, default=32)
    ap.add_argument("--input-max", type=int, default=1024)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--engine-args", default="{}",
                    help="JSON passed verbatim to vllm.LLM, as a scenario's engine_args (e.g. the CPU "
                         "table's kv_cache_memory_bytes)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from vllm import LLM, SamplingParams

    with open(f"{args.model}/config.json") as f:
        vocab = json.load(f)["vocab_size"]
    t0 = time.perf_counter()
    llm = LLM(model=args.model, load_format="dummy", dtype="bfloat16", skip_tokenizer_init=True,
              max_model_len=args.max_model_len, seed=0, **json.loads(args.engine_args))
    startup = time.perf_counter() - t0
    params = SamplingParams(temperature=0.0, max_tokens=args.output_len, ignore_eos=True, detokenize=False)
    rng = random.Random(args.seed)

    def batch(n: int) -> list[dict]:
        return [{"prompt_token_ids": [rng.randrange(100, vocab) for _ in range(rng.randint(args.input_min,
                                                                                            args.input_max))]}
                for _ in range(n)]

    llm.generate(batch(8), params, use_tqdm=False)  # warm-up
    passes = []
    for _ in range(args.iters):
        prompts = batch(args.num_prompts)
        start = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        elapsed = time.perf_counter() - start
        out_tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        in_tokens = sum(len(p["prompt_token_ids"]) for p in prompts)
        passes.append({"elapsed_time": elapsed, "output_tokens": out_tokens, "input_tokens": in_tokens,
                       "output_tokens_per_second": out_tokens / elapsed,
                       "tokens_per_second": (in_tokens + out_tokens) / elapsed})
        print(f"[fidelity] pass: {out_tokens / elapsed:.1f} output tok/s ({elapsed:.2f} s)", flush=True)
    result = {"workload": "mixed (hand-written, plain LLM.generate)", "startup_s": startup, "passes": passes,
              "median_output_tokens_per_second": statistics.median(p["output_tokens_per_second"] for p in passes)}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"[fidelity] median {result['median_output_tokens_per_second']:.1f} output tok/s", flush=True)


if __name__ == "__main__":
    main()
