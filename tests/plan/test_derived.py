"""What vLLM derives from its flags is modelled in one place (plan/derived.py) and agrees with vLLM's own code: the
scheduler's limits under chunked prefill, performance mode and overrides (checked against the installed vLLM's
``EngineArgs`` and ``SchedulerConfig``), the KV dtype's bytes, --num-gpu-blocks-override and vLLM's CUDA-graph
estimate switch, each through the plan a user gets."""

from __future__ import annotations

import dataclasses
import itertools
import re
import types

import pytest

from vllm_hpu_mm import envs
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.plan import inputs as plan_inputs
from vllm_hpu_mm.plan.args import SizingArgs
from vllm_hpu_mm.plan.derived import (
    CUDA_KV_DTYPES,
    KV_DTYPE_BYTES,
    LEVEL_CUDAGRAPH_MODE,
    SPECULATIVE_KEYS,
    SPECULATIVE_METHODS,
    graphs_off_by,
    optimization_level,
    processor_pixels,
    scheduler_limits,
    speculative_tokens,
    vision_tower_built,
)
from vllm_hpu_mm.plan.planner import plan
from vllm_hpu_mm.plan.render import over_budget_note, speculative_graphs, speculative_note
from vllm_hpu_mm.runtimes.arithmetic import vllm_batch_defaults
from vllm_hpu_mm.runtimes.base import BatchLimits, DeviceFacts

GIB = 1 << 30


def build(**kw: object) -> plan_inputs.PlanInputs:
    env = {str(k): str(v) for k, v in dict(kw.pop("env", {})).items()}  # type: ignore[call-overload]
    args = SizingArgs(model="Qwen/Qwen2.5-VL-7B-Instruct", **kw)  # type: ignore[arg-type]
    return plan_inputs.build(args, envs.load({}), env)


# --- the scheduler's limits ----------------------------------------------------------------------------------------


def test_without_chunked_prefill_the_token_budget_is_max_model_len() -> None:
    """vLLM 0.32 arg_utils.py:3140-3145: the default budget rises to max_model_len (main planned 2,048)."""
    i = build(device="gaudi2", runtime="vllm-gaudi", max_model_len=32768, enable_chunked_prefill=False)
    assert (i.max_num_batched_tokens, i.chunked_prefill) == (32768, False)
    assert build(device="gaudi2", runtime="vllm-gaudi", max_model_len=32768).max_num_batched_tokens == 2048


def test_a_token_budget_below_max_model_len_without_chunked_prefill_is_refused() -> None:
    """vLLM refuses to start (config/scheduler.py verify_max_model_len): the plan must not say "fits"."""
    with pytest.raises(ConfigError, match=r"--max-num-batched-tokens=1024 is below --max-model-len 32768 with "
                       r"chunked prefill off \(--no-enable-chunked-prefill\): vLLM refuses to start"):  # fmt: skip
        build(device="gaudi2", runtime="vllm-gaudi", max_model_len=32768, max_num_batched_tokens=1024,
              enable_chunked_prefill=False)  # fmt: skip
    # the fork's engine has chunked prefill off by default: the same refusal, naming the default and the fork's own
    # check (r14fork 16's note: it cited vLLM 0.32's file)
    with pytest.raises(ConfigError, match=r"chunked prefill off \(the runtime's default\): vLLM refuses to start "
                       r"\(the fork's vllm/config\.py SchedulerConfig\._verify_args\)"):  # fmt: skip
        build(device="gaudi2", runtime="vllm-fork", max_model_len=32768, max_num_batched_tokens=1024)


def test_throughput_mode_doubles_the_defaults_only() -> None:
    base = build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192)
    fast = build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, performance_mode="throughput")
    assert (fast.max_num_seqs, fast.max_num_batched_tokens) == (2 * base.max_num_seqs, 2 * base.max_num_batched_tokens)
    given = build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, performance_mode="throughput",
                  max_num_seqs=64)  # fmt: skip
    assert (given.max_num_seqs, given.max_num_batched_tokens) == (64, 2 * base.max_num_batched_tokens)
    assert "throughput" in fast.defaults_source


def _vllm_limits(args: SizingArgs, max_model_len: int) -> BatchLimits | str:
    """What the installed vLLM derives for ``args`` on its own platform (CPU here): its EngineArgs defaults, then its
    SchedulerConfig's checks; the refusal's text when it refuses."""
    from vllm.config import SchedulerConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    engine = EngineArgs(max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                        enable_chunked_prefill=args.enable_chunked_prefill,
                        performance_mode=args.performance_mode or "balanced")  # type: ignore[arg-type]  # fmt: skip
    if engine.enable_chunked_prefill is None:
        engine.enable_chunked_prefill = True  # _set_default_chunked_prefill_and_prefix_caching_args: a generative model
    model = types.SimpleNamespace(max_model_len=max_model_len, is_multimodal_model=False, is_mm_prefix_lm=False)
    parallel = types.SimpleNamespace(use_batched_dp_moe=False)  # what the method reads of the two configs
    engine._set_default_max_num_seqs_and_batched_tokens_args(UsageContext.OPENAI_API_SERVER, model, parallel)  # type: ignore[arg-type]
    assert engine.max_num_seqs is not None
    assert engine.max_num_batched_tokens is not None
    try:
        SchedulerConfig(max_num_batched_tokens=engine.max_num_batched_tokens, max_num_seqs=engine.max_num_seqs,
                        max_model_len=max_model_len, enable_chunked_prefill=engine.enable_chunked_prefill,
                        is_encoder_decoder=False)  # fmt: skip
    except ValueError as exc:
        return str(exc).split(" ")[0]
    return BatchLimits(engine.max_num_seqs, engine.max_num_batched_tokens, "vLLM", engine.enable_chunked_prefill)


GRID = list(itertools.product([None, True, False], [None, "balanced", "throughput", "interactivity"], [None, 64, 4096],
                              [None, 1024, 8192], [2048, 32768]))  # fmt: skip


@pytest.mark.vllm
def test_the_limits_are_the_ones_vllm_derives() -> None:
    """Every combination of the chunked-prefill, performance-mode and override flags, against vLLM's own
    EngineArgs._set_default_max_num_seqs_and_batched_tokens_args and SchedulerConfig on its platform (CPU here)."""
    defaults = vllm_batch_defaults(DeviceFacts("cpu", 64 * GIB, "cpu"))
    for chunked, mode, seqs, tokens, length in GRID:
        args = SizingArgs(enable_chunked_prefill=chunked, performance_mode=mode, max_num_seqs=seqs,
                          max_num_batched_tokens=tokens)  # fmt: skip
        theirs = _vllm_limits(args, length)
        try:
            ours: BatchLimits | str = scheduler_limits(defaults, length, args)
        except ConfigError as exc:
            ours = str(exc)
        case = (chunked, mode, seqs, tokens, length)
        if isinstance(theirs, str):
            assert isinstance(ours, str), case
            assert "vLLM refuses" in ours, case
        else:
            assert isinstance(ours, BatchLimits), case
            assert dataclasses.replace(ours, source="vLLM") == theirs, case


def test_a_refusal_names_the_flag_typed_not_the_default_it_met() -> None:
    """--max-num-seqs 100000 against the default token budget named --max-num-batched-tokens=2048, a flag not typed."""
    with pytest.raises(ConfigError, match=r"^--max-num-seqs=100000: vLLM refuses it: max_num_batched_tokens \(2048, "
                                          r"the default here\).*accepted: at most 2048"):  # fmt: skip
        build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, max_num_seqs=100000)
    with pytest.raises(ConfigError, match=r"^--max-num-batched-tokens=100: vLLM refuses it"):
        build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, max_num_seqs=256, max_num_batched_tokens=100)


# --- the KV cache --------------------------------------------------------------------------------------------------


def test_an_fp8_kv_cache_halves_the_bytes_per_token_and_doubles_the_blocks() -> None:
    bf16 = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192))
    fp8 = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, kv_cache_dtype="fp8_inc"))
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert fp8.kv_blocks >= 2 * bf16.kv_blocks - 1
    with pytest.raises(ConfigError, match="--kv-cache-dtype=nvfp4: vLLM accepts it, but the plan does not size"):
        build(device="gaudi2", runtime="vllm-gaudi", kv_cache_dtype="nvfp4")


def test_a_kv_dtype_no_cuda_attention_backend_takes_is_refused_on_cuda() -> None:
    with pytest.raises(ConfigError, match=r"^--kv-cache-dtype=fp8_inc: no vLLM 0.32 CUDA attention backend takes it"):
        build(device="h100", runtime="vllm-cuda", kv_cache_dtype="fp8_inc")
    fp8 = build(device="h100", runtime="vllm-cuda", kv_cache_dtype="fp8_e5m2")
    assert fp8.kv_dtype_size == 1


@pytest.mark.vllm
def test_the_cuda_kv_dtypes_are_the_ones_vllms_cuda_attention_backends_take() -> None:
    # FlashInfer's module needs flashinfer installed; its sized dtypes are Triton's too
    from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.v1.attention.backends.flex_attention import FlexAttentionBackend
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend

    taken = {d for b in (FlashAttentionBackend, FlexAttentionBackend, TritonAttentionBackend)
             for d in b.supported_kv_cache_dtypes}  # fmt: skip
    assert {d for d in KV_DTYPE_BYTES if d in taken} | {"auto"} == set(CUDA_KV_DTYPES)


# --- the vision tower under --limit-mm-per-prompt ----------------------------------------------------------------

TOWER_LIMITS = [
    ('{"image": 0, "video": 0}', False, False),
    ('{"image": {"count": 0}, "video": {"count": 0}}', False, False),
    ('{"image": 0}', False, True),  # video not named: vLLM's 999
    ('{"image": 0, "video": 1}', False, True),
    (None, True, False),  # --language-model-only: every limit 0
    (None, False, True),
]


@pytest.mark.parametrize(("limit", "language_only", "built"), TOWER_LIMITS)
def test_vllm_builds_no_tower_when_every_one_of_its_modalities_is_limited_to_zero(
    limit: str | None, language_only: bool, built: bool
) -> None:
    assert vision_tower_built(("image", "video"), limit, language_only) is built
    assert vision_tower_built((), '{"image": 0, "video": 0}')  # a family whose modalities are not known: kept


@pytest.mark.vllm
@pytest.mark.parametrize(("limit", "language_only", "built"), TOWER_LIMITS)
def test_the_tower_rule_is_the_one_vllms_multimodal_config_answers(
    limit: str | None, language_only: bool, built: bool
) -> None:
    import json

    from vllm.config.multimodal import MultiModalConfig

    config = MultiModalConfig(limit_per_prompt=json.loads(limit or "{}"), language_model_only=language_only)
    # interfaces.py _mark_tower_model's test, with Qwen2.5-VL's modalities
    assert (not all(config.get_limit_per_prompt(m) == 0 for m in ("image", "video"))) is built


# --- the image sizes --mm-processor-kwargs bounds ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "limits"),
    [
        ({"max_pixels": 802816}, (None, 802816)),
        ({"min_pixels": 3136, "max_pixels": 802816}, (3136, 802816)),
        ({"size": {"shortest_edge": 3136, "longest_edge": 401408}}, (3136, 401408)),
        ({"size": {"longest_edge": 401408}, "max_pixels": 802816}, (None, 802816)),  # max_pixels over size
        ({"max_pixels": 802816, "images_kwargs": {"max_pixels": 401408}}, (None, 401408)),  # the scoped value wins
        ({"videos_kwargs": {"max_pixels": 401408}}, (None, None)),  # videos only
        ({"fps": 2}, (None, None)),
        (None, (None, None)),
    ],
)
def test_the_processor_resizes_images_within_the_pixels_mm_processor_kwargs_give(
    kwargs: dict[str, object] | None, limits: tuple[int | None, int | None]
) -> None:
    assert processor_pixels(kwargs) == limits


@pytest.mark.parametrize("kwargs", [{"max_pixels": 0}, {"max_pixels": "big"}, {"min_pixels": 9, "max_pixels": 8}])
def test_processor_pixels_that_are_not_a_positive_range_are_refused_naming_the_flag(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=r"^--mm-processor-kwargs: .*accepted"):
        processor_pixels(kwargs)


@pytest.mark.vllm
def test_the_processor_pixels_are_the_size_vllms_qwen2_vl_processing_reads() -> None:
    from vllm.model_executor.models.qwen2_vl import Qwen2VLProcessingInfo

    for scoped in ({"max_pixels": 802816}, {"size": {"longest_edge": 401408}, "min_pixels": 6272}, {}):
        size = Qwen2VLProcessingInfo._get_vision_size(scoped, default_size={"shortest_edge": 1, "longest_edge": 2})
        low, high = processor_pixels({"images_kwargs": scoped})
        assert (low or 1, high or 2) == (size["shortest_edge"], size["longest_edge"])


def test_num_gpu_blocks_override_sets_the_blocks_and_refuses_more_than_memory_holds() -> None:
    few = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, num_gpu_blocks_override=500))
    assert few.kv_blocks == 500
    assert few.fits
    assert few.max_concurrent_seqs == 500 // (8192 // 128)
    many = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, num_gpu_blocks_override=10**7))
    assert not many.fits
    assert any("vLLM allocates the override regardless" in f.message for f in many.findings)


def test_an_override_too_small_for_one_sequence_names_the_override_and_its_own_fix() -> None:
    """vLLM 0.32 get_kv_cache_configs checks the override's blocks less the null block: 256 + 1 hold 32,768 tokens
    of 128; 100 do not, whatever memory is left (the plan blamed the memory and offered a longer max_model_len)."""
    few = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=32768, num_gpu_blocks_override=100))
    assert not few.fits
    (error,) = (f for f in few.findings if f.severity == "error")
    assert error.message.startswith("--num-gpu-blocks-override 100 (12672 tokens in blocks of 128")
    assert error.fix.text == "--num-gpu-blocks-override 257 or more, or lower --max-model-len to 12672"
    assert plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=32768, num_gpu_blocks_override=257)).fits
    # 8 blocks of 128 hold 1,024 tokens, but only 7 are usable: a 1,000-token sequence does not fit
    eight = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=1000, num_gpu_blocks_override=8))
    assert not eight.fits
    assert any(f.fix.text.startswith("--num-gpu-blocks-override 9 or more") for f in eight.findings)


def test_the_fork_checks_every_override_block_as_its_v0_worker_does() -> None:
    """vllm-fork @2e9b2b3d4 hpu_worker.py raise_if_cache_size_invalid: max_model_len <= block_size x blocks, no null
    block (V0 by default): 256 blocks of 128 hold 32,768 tokens (the plan refused them as vLLM V1 would)."""
    fork = plan(build(device="gaudi2", runtime="vllm-fork", max_model_len=32768, num_gpu_blocks_override=256))
    assert (fork.fits, fork.max_concurrent_seqs) == (True, 1)
    short = plan(build(device="gaudi2", runtime="vllm-fork", max_model_len=32768, num_gpu_blocks_override=255))
    (error,) = (f for f in short.findings if f.severity == "error")
    assert error.message.startswith("--num-gpu-blocks-override 255 (32640 tokens in blocks of 128) cannot")
    assert error.fix.text == "--num-gpu-blocks-override 256 or more, or lower --max-model-len to 32640"


def _fix_values(p: object, flag: str) -> list[int]:
    texts = [f.fix.text for f in p.findings if f.severity == "error"]  # type: ignore[attr-defined]
    return [int(t.split(f"{flag} to ")[1].split(";")[0]) for t in texts if f"{flag} to " in t]


def test_the_suggested_max_model_len_and_kv_cache_bytes_leave_the_null_block_and_fit_when_followed() -> None:
    """vLLM 0.32 get_kv_cache_configs checks against the KV cache less the block pool's null block: 235 blocks hold
    234 x 128 = 29,952 tokens (the fix said 30,080); 2 GiB of 7 MiB blocks hold 291 x 128 = 37,248 and 40,000 tokens
    need 313 + 1 blocks (the fix said 313)."""
    gaudi: dict[str, object] = {"device": "gaudi2", "runtime": "vllm-gaudi", "free_memory_gib": 2.0,
                                "gpu_memory_utilization": 0.9, "graph_reserved_mem": 0.1}  # fmt: skip
    refused = plan(build(max_model_len=32768, **gaudi))
    assert refused.kv_blocks == 235
    assert _fix_values(refused, "--max-model-len") == [29952]
    assert plan(build(max_model_len=29952, **gaudi)).fits
    assert not plan(build(max_model_len=30080, **gaudi)).fits
    cpu: dict[str, object] = {"device": "cpu", "runtime": "vllm-cpu", "total_memory_gib": 64.0}
    refused = plan(build(max_model_len=40000, kv_cache_memory_bytes=2 * GIB, **cpu))
    assert _fix_values(refused, "--max-model-len") == [37248]
    assert _fix_values(refused, "--kv-cache-memory-bytes") == [314 * 7 * 2**20]
    assert plan(build(max_model_len=37248, kv_cache_memory_bytes=2 * GIB, **cpu)).fits
    assert plan(build(max_model_len=40000, kv_cache_memory_bytes=314 * 7 * 2**20, **cpu)).fits
    assert not plan(build(max_model_len=40000, kv_cache_memory_bytes=314 * 7 * 2**20 - 1, **cpu)).fits
    # once it starts, the sequences are vLLM's "Maximum concurrency", which counts every block: 292 // 146
    assert plan(build(max_model_len=146 * 128, kv_cache_memory_bytes=2 * GIB, **cpu)).max_concurrent_seqs == 2


def test_float32_is_planned_in_bfloat16_on_vllm_gaudi_and_said_so_but_kept_where_the_runtime_serves_it() -> None:
    """vllm-gaudi @091bbadd platform.py check_and_update_config replaces float16 / float32 by bfloat16 (every tagged
    release); vLLM CPU and the fork (platforms/hpu.py supported_dtypes @2e9b2b3d4: bfloat16, float32) keep float32."""
    gaudi = build(device="gaudi2", runtime="vllm-gaudi", max_model_len=32768, dtype="float32")
    assert (gaudi.dtype_size, gaudi.kv_dtype_size) == (2, 2)
    (note,) = (f for f in plan(gaudi).findings if f.code == "dtype_replaced")
    assert note.severity == "info"
    assert "vllm-gaudi serves bfloat16" in note.message
    assert plan(gaudi).kv_blocks == plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=32768)).kv_blocks
    for runtime, device in (("vllm-cpu", "cpu"), ("vllm-fork", "gaudi2")):
        kept = build(device=device, runtime=runtime, max_model_len=16384, dtype="float32")
        assert (kept.dtype_size, kept.kv_dtype_size, kept.dtype_note) == (4, 4, "")


def test_the_fork_refuses_a_16_bit_kv_cache_dtype_as_its_parser_does() -> None:
    """vllm-fork @2e9b2b3d4 vllm/config.py CacheDType (its --kv-cache-dtype choices): auto and the fp8 family only
    (the plan sized bfloat16 at 2 bytes and said it fits)."""
    with pytest.raises(ConfigError, match=r"^--kv-cache-dtype=bfloat16: vllm-fork refuses it .*; accepted: auto, fp8, "
                       r"fp8_e4m3, fp8_e5m2, fp8_inc$"):  # fmt: skip
        build(device="gaudi2", runtime="vllm-fork", kv_cache_dtype="bfloat16")
    assert build(device="gaudi2", runtime="vllm-fork", kv_cache_dtype="fp8_inc").kv_dtype_size == 1
    assert build(device="gaudi2", runtime="vllm-gaudi", kv_cache_dtype="bfloat16").kv_dtype_size == 2


def test_kv_cache_memory_bytes_is_read_where_the_runtime_reads_it_and_said_where_it_does_not() -> None:
    """vLLM 0.32 gpu_worker.py:649 sizes the KV cache to --kv-cache-memory-bytes (the CUDA plan ignored it);
    vllm-gaudi @091bbadd never reads it (a warning, the KV cache as its worker sizes it); vllm-fork's vLLM has no
    such flag (refused)."""
    cuda = plan(build(device="h100", runtime="vllm-cuda", max_model_len=8192, kv_cache_memory_bytes=8 * 10**9))
    assert cuda.split.kv_cache_bytes == 8 * 10**9
    assert cuda.fits
    # more than the card leaves after the weights: vLLM allocates it anyway (utilization not read), an OOM
    over = plan(build(device="h100", runtime="vllm-cuda", max_model_len=8192, kv_cache_memory_bytes=75 * 10**9))
    (error,) = (f for f in over.findings if f.severity == "error")
    assert error.code == "kv_cache_over_memory"
    assert error.fix.value is not None
    assert plan(
        build(device="h100", runtime="vllm-cuda", max_model_len=8192, kv_cache_memory_bytes=error.fix.value)
    ).fits
    plain = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192))
    told = plan(build(device="gaudi2", runtime="vllm-gaudi", max_model_len=8192, kv_cache_memory_bytes=8 * 10**9))
    assert told.kv_blocks == plain.kv_blocks
    (warning,) = (f for f in told.findings if f.code == "flag_not_read")
    assert warning.severity == "warning"
    assert warning.message.startswith("--kv-cache-memory-bytes 8000000000 is not read by vllm-gaudi")
    with pytest.raises(ConfigError, match=r"^--kv-cache-memory-bytes: vllm-fork does not take it"):
        build(device="gaudi2", runtime="vllm-fork", kv_cache_memory_bytes=8 * 10**9)


@pytest.mark.parametrize(("runtime", "cited"), [("vllm-fork==0.9.0.1", "@2e9b2b3d4, v0.9.0.1+Gaudi-1.22.0"),
                                               ("vllm-fork==0.7.2", "@0275ce4c2, v0.7.2+Gaudi-1.21.0")])  # fmt: skip
def test_the_forks_refusal_of_kv_cache_memory_bytes_cites_the_release_planned_for(runtime: str, cited: str) -> None:
    # r8fork 21: it cited habana_main @95af7009 whichever release was named
    with pytest.raises(ConfigError, match=rf"vllm/engine/arg_utils.py {re.escape(cited)}\) has no kv_cache_memory"):
        build(device="gaudi2", runtime=runtime, kv_cache_memory_bytes=8 * 10**9)


def test_the_cuda_plan_follows_vllms_cudagraph_estimate_switch() -> None:
    """VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (declared in envs.py, vLLM reads bool(int(value))): on by default,
    0 gives the graphs' memory back to the KV cache; a value vLLM cannot read is refused."""
    on = plan(build(device="h100", runtime="vllm-cuda", max_model_len=8192))
    off = plan(build(device="h100", runtime="vllm-cuda", max_model_len=8192,
                     env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}))  # fmt: skip
    assert off.split.kv_cache_bytes > on.split.kv_cache_bytes
    with pytest.raises(ConfigError, match="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS='true'"):
        envs.load({"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "true"})
    with pytest.raises(ConfigError, match="VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS='false'"):
        plan(build(device="h100", runtime="vllm-cuda", env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "false"}))


def test_derived_limits_are_frozen_values() -> None:
    limits = BatchLimits(1, 2, "given", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_num_seqs = 3  # type: ignore[misc]


# --- speculative decoding ------------------------------------------------------------------------------------------


def test_a_speculative_config_adds_vllm_gaudis_spec_decode_buckets() -> None:
    """vllm-gaudi (from b8515d5f #624) adds decode buckets of batch x (1 + tokens): the plan read none before."""
    ngram = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}
    plain = plan(build(device="gaudi2", runtime="vllm-gaudi==0.26.0", max_model_len=8192))
    spec = plan(build(device="gaudi2", runtime="vllm-gaudi==0.26.0", max_model_len=8192, speculative_config=ngram))
    assert spec.inputs.num_speculative_tokens == 2
    seeds = {(b.batch, b.context) for b in plain.text_graphs.decode}
    ours = {(b.batch, b.context) for b in spec.text_graphs.decode}
    assert seeds < ours
    assert all(b % 3 == 0 for b, _ in ours - seeds)  # every added bucket holds batch x (1 + 2) tokens


@pytest.mark.parametrize(("config", "said"), [
    ([1], "is not a JSON object"),
    ({"method": "ngram"}, "no num_speculative_tokens"),
    ({"method": "ngram", "num_speculative_tokens": 0}, "accepted: an integer >= 1"),
    ({"method": "foo", "num_speculative_tokens": 2}, "vLLM refuses it: method 'foo' is not a method vLLM knows"),
    ({"num_speculative_tokens": 2}, "vLLM refuses it: num_speculative_tokens was provided but without speculative"),
    ({"method": "eagle", "num_speculative_tokens": 3}, "method 'eagle' needs 'model'"),
    ({"method": "ngram", "num_speculative_tokens": 2, "bogus": 1}, "'bogus': not a key vLLM's SpeculativeConfig"),
    ({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 5, "prompt_lookup_max": 2},
     "prompt_lookup_min=5 must be <= prompt_lookup_max=2"),
])  # fmt: skip
def test_a_speculative_config_the_plan_cannot_size_is_refused(config: object, said: str) -> None:
    with pytest.raises(ConfigError, match=f"--speculative-config: .*{said}"):
        build(device="gaudi2", runtime="vllm-gaudi", speculative_config=config)


#: Speculative configs vLLM's SpeculativeConfig judges alone (no target model, no optional package): accepted ones
#: and each refusal of its field types and __post_init__.
SPECULATIVE_GRID = (
    {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4},
    {"model": "ngram", "num_speculative_tokens": 2},
    {"method": "ngram_gpu", "num_speculative_tokens": 1, "prompt_lookup_max": 3},
    {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 3},
    {"method": "foo", "num_speculative_tokens": 2},
    {"num_speculative_tokens": 2},
    {"method": "eagle", "num_speculative_tokens": 3},
    {"method": "draft_model", "num_speculative_tokens": 2},
    {"method": "custom_class", "num_speculative_tokens": 2},
    {"method": "ngram", "num_speculative_tokens": 2, "bogus": 1},
    {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 5, "prompt_lookup_max": 2},
    {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0},
)


@pytest.mark.vllm
def test_a_speculative_config_is_refused_exactly_where_vllm_refuses_it() -> None:
    import typing

    from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod

    def flat(t: object) -> list[object]:
        return [x for a in typing.get_args(t) for x in (flat(a) if typing.get_args(a) else [a])]

    assert sorted(SPECULATIVE_METHODS) == sorted(flat(SpeculativeMethod))  # type: ignore[type-var]
    assert set(SPECULATIVE_KEYS) == {f.name for f in dataclasses.fields(SpeculativeConfig) if f.init}
    for config in SPECULATIVE_GRID:
        try:
            SpeculativeConfig(**config)  # type: ignore[arg-type]
            theirs = True
        except ValueError:  # pydantic's ValidationError is one
            theirs = False
        said = ""
        try:
            speculative_tokens(config, "--speculative-config")
        except ConfigError as exc:
            said = str(exc)
        assert (said == "") == theirs, config
        assert theirs or "vLLM refuses it" in said, config


# --- limits a user can pass ----------------------------------------------------------------------------------------


def test_a_named_releases_budget_cap_is_its_own_strategies_and_names_the_one_it_comes_from() -> None:
    # r13gaudi 20: v0.19.1 ships exp and lin (pad from v0.20.0rc0); the cap was said "(exp, lin or pad)" and counted the
    # newest release's strategies
    from vllm_hpu_mm.plan.text_choice import most_graphs
    from vllm_hpu_mm.runtimes import registry

    i = build(device="gaudi2", runtime="vllm-gaudi==0.19.1", max_model_len=4096, max_num_seqs=16)
    shape = i.engine(plan(i).kv_blocks)
    shipped = registry.strategies(i.runtime_name, {}, "0.19.1")
    assert len(shipped) == 2
    most, whose = most_graphs(i, shape)
    assert most == max(len(m.text_shapes(shape).prefill) + len(m.text_shapes(shape).decode) for m in shipped)
    assert "lin" in whose
    assert "pad" not in whose


def test_a_text_graph_budget_above_exps_count_up_to_the_largest_strategys_is_planned() -> None:
    """A pad or lin user (more graphs than exp) can ask for the best plan at their own warm-up: the cap is the
    runtime's largest built-in strategy's count for these limits (main capped it at exp's)."""
    from vllm_hpu_mm.plan.text_choice import choose_text
    from vllm_hpu_mm.runtimes import registry
    from vllm_hpu_mm.traffic.default import default_traffic

    i = build(device="gaudi2", runtime="vllm-gaudi", max_model_len=4096, max_num_seqs=16)
    first = plan(i)
    shape = i.engine(first.kv_blocks)
    counts = [len(m.text_shapes(shape).prefill) + len(m.text_shapes(shape).decode)
              for m in (i.runtime, *registry.strategies(i.runtime_name, {}))]  # fmt: skip
    own, most = counts[0], max(counts)
    assert most > own
    _, choice = choose_text(first, default_traffic(), envs.load({}), budget=own + 1, concurrency=4, requests=60)
    assert choice is not None
    assert choice.budget == own + 1
    with pytest.raises(
        ConfigError,
        match=f"accepted: at most {most} .what vllm-gaudi main's lin bucketing warms for the limits, the largest ",
    ):
        choose_text(first, default_traffic(), envs.load({}), budget=most + 1, concurrency=4, requests=60)


def test_the_plan_says_in_words_when_speculative_decoding_changes_the_decode_graphs_and_overruns_the_budget() -> None:
    # held-out round 8, K10: decode graphs 19 -> 53 and 94 graphs under a budget of 60, without a word
    ngram = {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}
    spec = plan(build(device="gaudi2", runtime="vllm-gaudi==0.26.0", max_model_len=8192, speculative_config=ngram))
    listed, warmed = speculative_graphs(spec) or (0, 0)
    assert 0 < listed < warmed == len(spec.text_graphs.decode)
    note = speculative_note(spec, (listed, warmed))
    assert note is not None
    assert f"speculative decoding (2 tokens per step) changes the decode graphs: {listed} listed" in note
    assert f"warm {warmed} graphs" in note
    assert speculative_graphs(plan(build(device="gaudi2", runtime="vllm-gaudi==0.26.0", max_model_len=8192))) is None
    over = over_budget_note("planned from traffic", 94, 60, 34)
    assert over is not None
    assert "94 graphs, 34 over the text-graph budget of 60 (the 34 speculative decode graphs" in over
    assert over_budget_note("planned from traffic", 60, 60, 0) is None


# --- -O, --compilation-config and --enforce-eager: one rule for whether any graph is captured -----------------------


@pytest.mark.parametrize(("raw", "level"), [(None, 2), ("0", 0), ("3", 3), (" 1", 1), ("01", 1), ("1.0", 1), (2, 2)])
def test_the_optimization_level_is_read_as_vllms_pydantic_reads_it(raw: object, level: int) -> None:
    assert optimization_level(raw, "-O") == level


@pytest.mark.parametrize("raw", ["4", "-1", "1_0", "O1", "true", ""])
def test_a_level_vllm_refuses_is_refused_with_the_flag_typed(raw: str) -> None:
    """-O4 was planned as -O2; vLLM's OptimizationLevel has 0-3 only and stops before it starts."""
    with pytest.raises(ConfigError, match=r"server argument -O4: .*accepted: 0, 1, 2 or 3"):
        optimization_level(raw, "server argument -O4")


@pytest.mark.parametrize(
    ("eager", "config", "level", "off"),
    [
        (False, None, 2, None),
        (False, None, 1, None),
        (False, None, 0, "-O0 (cudagraph_mode NONE)"),
        (True, None, 2, "--enforce-eager"),
        (False, {"cudagraph_mode": "none"}, 2, "--compilation-config (cudagraph_mode NONE)"),
        (False, {"cudagraph_mode": 0}, 3, "--compilation-config (cudagraph_mode NONE)"),
        (False, {"cudagraph_mode": "FULL"}, 0, None),  # the user's mode wins over the level's default
        (False, {"cudagraph_mode": "piecewise"}, 0, "--compilation-config (cudagraph_mode PIECEWISE, compile mode "
         "NONE: vLLM turns the graphs off)"),
        (False, {"mode": 0}, 1, "-O1 (cudagraph_mode PIECEWISE, compile mode NONE: vLLM turns the graphs off)"),
        (False, {"mode": "none"}, 2, None),  # FULL_AND_PIECEWISE keeps its full decode graphs
        (False, {"cudagraph_capture_sizes": [1, 2]}, 2, None),
    ],
)  # fmt: skip
def test_what_turns_the_cuda_graphs_off(eager: bool, config: dict[str, object] | None, level: int,
                                        off: str | None) -> None:  # fmt: skip
    assert graphs_off_by(eager, config, level, cuda_graphs=True) == off


def test_only_enforce_eager_turns_graphs_off_where_they_are_not_cuda_graphs() -> None:
    """vllm-gaudi sets cudagraph_mode NONE itself; its HPU graphs follow --enforce-eager alone."""
    assert graphs_off_by(False, {"cudagraph_mode": "NONE"}, 0, cuda_graphs=False) is None
    assert graphs_off_by(True, None, 2, cuda_graphs=False) == "--enforce-eager"


@pytest.mark.vllm
def test_the_levels_cudagraph_modes_are_vllms() -> None:
    from vllm.config.vllm import OPTIMIZATION_LEVEL_TO_CONFIG

    vllms = {
        int(k): v["compilation_config"]["cudagraph_mode"].name  # type: ignore[index]
        for k, v in OPTIMIZATION_LEVEL_TO_CONFIG.items()
    }
    assert vllms == LEVEL_CUDAGRAPH_MODE
