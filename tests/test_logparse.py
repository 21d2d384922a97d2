"""Failure attribution from a task's run.log: the root cause's line is the signature, and its class.

The excerpts have the shape of vLLM's own output: the engine core's traceback behind its process
and logger prefixes, printed twice (logged, then by multiprocessing), and the wrappers the parent
process raises afterwards ("Engine core initialization failed. See root cause above."). The gemma-4
cases are the two failures of shared/seeds/h200-vllm-ablation-report.txt ("gemma-4-26B: two
different failures"): 0.18 does not know the model (unsupported-model), 0.26 meets a transformers
release it was not written for (dependency: pinning transformers 5.14.1 fixes it).
"""

from __future__ import annotations

import pytest

from ablation.execution.logparse import _classify, attribute_failure, error_signature

SITE = "/root/.cache/vllm-ablation/venvs/0.26-h200/lib/python3.12/site-packages"
AMBIGUOUS = (
    "transformers.integrations.heterogeneity.configuration_utils.AmbiguousGlobalPerLayerAttributeError: "
    "'head_dim' is a per-layer attribute and may vary across layers. Access it via the individual layer configs "
    "instead (e.g. config.per_layer_config[i].head_dim). To read the global config value from config.head_dim "
    "anyway, set `allow_global_per_layer_attribute_access` to `True` on the config. Warning: only do this if the "
    "caller can safely handle heterogeneous configs; code that assumes a homogeneous model may use the global "
    "value incorrectly.")
TRANSFORMERS_FRAMES = [
    f'  File "{SITE}/vllm/model_executor/models/gemma4.py", line 412, in __init__',
    "    self.head_dim = config.head_dim",
    "                    ^^^^^^^^^^^^^^^",
    f'  File "{SITE}/transformers/integrations/heterogeneity/configuration_utils.py", line 298, in __getattribute__',
    "    raise AmbiguousGlobalPerLayerAttributeError(",
]


def engine_core_traceback(prefix: str, frames: list[str], last: str) -> list[str]:
    """One traceback as an engine process prints it: every line behind `prefix`."""
    return [f"{prefix}Traceback (most recent call last):",
            *(f"{prefix}{f}" for f in frames), f"{prefix}{last}"]


def gemma4_026_engine_core_log(core: str = "EngineCore_DP0 pid=4127") -> str:
    logged = f"({core}) ERROR 12-03 14:02:11 [core.py:1108] "
    raw = f"({core}) "
    frames = [f'  File "{SITE}/vllm/v1/engine/core.py", line 1082, in run_engine_core',
              "    engine_core = EngineCoreProc(*args, **kwargs)",
              f'  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 2871, in load_model',
              "    self.model = model_loader.load_model(",
              *TRANSFORMERS_FRAMES]
    return "\n".join([
        "INFO 12-03 14:01:40 [__init__.py:235] Automatically detected platform cuda.",
        f"({core}) INFO 12-03 14:01:58 [core.py:93] Initializing a V1 LLM engine (v0.26.0) with config: "
        "model='/models/google__gemma-4-26B-A4B-it', ...",
        f"({core}) WARNING 12-03 14:02:10 [config.py:512] UserWarning: something harmless",
        f"({core}) ERROR 12-03 14:02:11 [core.py:1108] EngineCore failed to start.",
        *engine_core_traceback(logged, frames, AMBIGUOUS),
        f"({core}) Process EngineCore_DP0:",
        *engine_core_traceback(raw, ['  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, '
                                     "in _bootstrap", "    self.run()", *frames], AMBIGUOUS),
        "Traceback (most recent call last):",
        '  File "/work/ablation/harness/vllm_harness.py", line 301, in <module>',
        "    code = main(sys.argv[1])",
        f'  File "{SITE}/vllm/v1/engine/utils.py", line 1033, in wait_for_engine_startup',
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {'EngineCore_DP0': 1}",
        "[rank0]:[W1203 14:02:12.123456 ProcessGroupNCCL.cpp:1524] Warning: WARNING: destroy_process_group() "
        "was not called before program exit",
    ])


def test_gemma4_on_026_is_a_dependency_failure_named_by_its_root_cause():
    log = gemma4_026_engine_core_log()
    sig = error_signature(log)
    assert sig.startswith("transformers.integrations.heterogeneity.configuration_utils."
                          "AmbiguousGlobalPerLayerAttributeError: 'head_dim' is a per-layer attribute and may vary "
                          "across layers")
    assert "Engine core initialization failed" not in sig
    cause = attribute_failure(log, exit_code=1, timed_out=False)
    assert cause.cls == "dependency" and cause.signature == sig


def test_gemma4_on_026_behind_a_tp_worker_and_two_wrappers():
    """tp>1: the root cause is in a worker, the engine core re-raises a WorkerProc wrapper, the
    parent an engine wrapper; the worker's exception is the signature."""
    worker = "(Worker_TP0 pid=4311) ERROR 12-03 14:02:11 [multiproc_executor.py:702] "
    log = "\n".join([
        f"{worker}WorkerProc failed to start.",
        *engine_core_traceback(worker, TRANSFORMERS_FRAMES, AMBIGUOUS),
        "(EngineCore_DP0 pid=4127) ERROR 12-03 14:02:13 [core.py:1108] Exception: WorkerProc initialization "
        "failed due to an exception in a background process. See stack trace for root cause.",
        "Traceback (most recent call last):",
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ])
    cause = attribute_failure(log, exit_code=1, timed_out=False)
    assert cause.cls == "dependency" and "AmbiguousGlobalPerLayerAttributeError: 'head_dim'" in cause.signature


def test_gemma4_on_026_raised_in_the_parent_process():
    """Read while the parent builds the engine config (no engine core yet): the harness prints it."""
    log = "\n".join(["Traceback (most recent call last):",
                     '  File "/work/ablation/harness/vllm_harness.py", line 301, in <module>',
                     f'  File "{SITE}/vllm/config/model.py", line 1290, in get_head_size',
                     "    return self.hf_text_config.head_dim",
                     *TRANSFORMERS_FRAMES[3:], AMBIGUOUS])
    assert attribute_failure(log, exit_code=1, timed_out=False).cls == "dependency"


def gemma4_018_log() -> str:
    """vLLM 0.18 with transformers 4.57.6: the config's model type is unknown; transformers' KeyError
    and ValueError, then pydantic's ValidationError of vLLM's ModelConfig, reason on the next line."""
    value_error = ("The checkpoint you are trying to load has model type `gemma4` but Transformers does not "
                   "recognize this architecture. This could be because of an issue with the checkpoint, or "
                   "because your version of Transformers is out of date.")
    return "\n".join([
        "INFO 12-03 13:40:02 [utils.py:253] non-default args: {'model': '/models/google__gemma-4-26B-A4B-it'}",
        "Traceback (most recent call last):",
        f'  File "{SITE}/transformers/models/auto/configuration_auto.py", line 1271, in from_pretrained',
        '    config_class = CONFIG_MAPPING[config_dict["model_type"]]',
        "KeyError: 'gemma4'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/transformers_utils/config.py", line 625, in get_config',
        f"ValueError: {value_error}",
        "",
        "You can update Transformers with the command `pip install --upgrade transformers`.",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/work/ablation/harness/vllm_harness.py", line 301, in <module>',
        f'  File "{SITE}/pydantic/_internal/_dataclasses.py", line 123, in __init__',
        "    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
        f"  Value error, {value_error} [type=value_error, input_value=ArgsKwargs((), {{'model': "
        "'/models/google__gemma-4-26B-A4B-it'}), input_type=ArgsKwargs]",
        "    For further information visit https://errors.pydantic.dev/2.12/v/value_error",
    ])


def test_gemma4_on_018_stays_unsupported_model():
    log = gemma4_018_log()
    sig = error_signature(log)
    assert sig.startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig "
                          "Value error, The checkpoint you are trying to load has model type `gemma4`")
    assert "does not recognize this architecture" in sig
    cause = attribute_failure(log, exit_code=1, timed_out=False)
    assert cause.cls == "unsupported-model"


@pytest.mark.parametrize("signature, cls", [
    (AMBIGUOUS, "dependency"),
    ("AmbiguousGlobalPerLayerAttributeError: 'head_dim' is a per-layer attribute", "dependency"),
    ("RuntimeError: 'head_dim' is a per-layer attribute and may vary across layers", "runtime-crash"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "runtime-crash"),
    ("AttributeError: module 'cutlass.cute.core' has no attribute 'ThrMma'", "dependency"),
    ("ValueError: Model architectures ['Gemma4ForConditionalGeneration'] are not supported for now.",
     "unsupported-model"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
])
def test_classes_are_chosen_by_what_the_signature_names(signature, cls):
    """The version-skew rule names the exception, not its words: the same message from another
    exception type is not claimed for it."""
    assert _classify(signature) == cls
