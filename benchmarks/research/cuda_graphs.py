"""Research code, not served: a CUDA-graph pass executor for *transformers'* Qwen2.5-VL vision tower.

On CUDA the server runs vLLM's own encoder CUDA graphs (``vllm_hpu_mm.runtimes.vllm_cuda.encoder_graphs``
configures them from the buckets); nothing in the package imports this module. It is kept, with its tests
(``test_cuda_graphs.py``, run on a CUDA machine), because ``benchmarks/performance/vision_encoder_h100.py`` and
``benchmarks/performance/vision_memory_calibration.py`` measure it: their results
(``benchmarks/performance/results/vision_encoder_h100.md``, ``vision_memory_calibration.md``) are the H100 figures
docs/performance.md quotes and the source of the memory model's coefficients.

transformers' shipped vision forward cannot be captured: it builds its index tensors from ``grid_thw.tolist()`` and
its SDPA path splits attention with ``lengths.tolist()`` in every block (a host sync each time). This module runs the
same tower with

- every index tensor (rotary positions, window permutation and its inverse, ``cu_seqlens`` of the image and window
  segments) built on the host from the CPU ``grid_thw`` (:func:`pass_layout`) and copied into static buffers;
- one variable-length attention call per layer (:func:`varlen_attention`, PyTorch's flash varlen kernel), so the
  number of images in a pass is data, not code: ``cu_seqlens`` is padded with zero-length segments to a fixed
  capacity per bucket and one graph serves every composition of that bucket;
- one CUDA graph per bucket, all captured into one shared memory pool on one reused side stream (graphs replay one
  at a time, so they can share intermediates: 810 MiB shared vs 2926 MiB private for the seven default buckets on
  the H100, ``benchmarks/performance/results/vision_memory_calibration.md``; and every new stream brings its own cuBLAS
  workspace).

Weights, norms and MLPs are the tower's own modules, so a tower padded by :mod:`benchmarks.research.mlp_pad` or
moved to another dtype runs unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

from vllm_hpu_mm.errors import BackendError

logger = logging.getLogger(__name__)

#: ``(q, k, v [P, heads, head_dim], cu_seqlens int32 [S + 1], max_seqlen) -> [P, heads, head_dim]``.
#: transformers' ``Qwen2_5_VisionTransformerPretrainedModel`` (or a module with the same attributes); untyped upstream.
Tower = Any

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor]


@dataclasses.dataclass(frozen=True)
class TowerGeometry:
    """The config values of a Qwen2.5-VL vision tower that shape its index tensors."""

    spatial_merge_size: int
    window_size: int
    patch_size: int
    fullatt_block_indexes: tuple[int, ...]

    @classmethod
    def from_tower(cls, tower: Tower) -> TowerGeometry:
        cfg = tower.config
        return cls(
            spatial_merge_size=int(cfg.spatial_merge_size),
            window_size=int(cfg.window_size),
            patch_size=int(cfg.patch_size),
            fullatt_block_indexes=tuple(int(i) for i in cfg.fullatt_block_indexes),
        )

    @property
    def merge_unit(self) -> int:
        """Patches per merged token (4 for a 2x2 merge)."""
        return self.spatial_merge_size**2

    @property
    def window_merged(self) -> int:
        """Side of an attention window in merged tokens (112 / 14 / 2 = 4)."""
        return self.window_size // self.spatial_merge_size // self.patch_size

    @property
    def max_window_patches(self) -> int:
        """Patches in a full window: the longest window segment (64 for Qwen2.5-VL)."""
        return self.window_merged**2 * self.merge_unit


@dataclasses.dataclass(frozen=True)
class PassLayout:
    """Host-built index tensors for one pass (CPU tensors; ``P`` patches, ``P / merge_unit`` merged tokens)."""

    #: ``[P, 2]`` int64 (row, column) of each patch, in the tower's merge-block order.
    position_ids: torch.Tensor
    #: ``[P / merge_unit]`` int64: merged token order grouped by attention window.
    window_index: torch.Tensor
    #: ``[P / merge_unit]`` int64: inverse of ``window_index`` (restores image order after the merger).
    reverse_index: torch.Tensor
    #: ``[S_full + 1]`` int32 patch offsets of the per-frame segments (full-attention layers).
    cu_seqlens: torch.Tensor
    #: ``[S_win + 1]`` int32 patch offsets of the windows (windowed layers).
    cu_window_seqlens: torch.Tensor
    max_seqlen: int
    max_window_seqlen: int

    @property
    def patches(self) -> int:
        return int(self.position_ids.shape[0])

    @property
    def full_segments(self) -> int:
        return int(self.cu_seqlens.shape[0]) - 1

    @property
    def window_segments(self) -> int:
        return int(self.cu_window_seqlens.shape[0]) - 1


def _grid_rows(grid_thw: torch.Tensor | Sequence[Sequence[int]]) -> tuple[tuple[int, int, int], ...]:
    rows = grid_thw.tolist() if isinstance(grid_thw, torch.Tensor) else [list(r) for r in grid_thw]
    out: list[tuple[int, int, int]] = []
    for row in rows:
        if len(row) != 3:
            raise ValueError(f"grid_thw rows must be (t, h, w); got {row!r}")
        t, h, w = (int(v) for v in row)
        if t <= 0 or h <= 0 or w <= 0:
            raise ValueError(f"grid_thw row {row!r} has a non-positive entry; t, h and w must be >= 1")
        out.append((t, h, w))
    if not out:
        raise ValueError("grid_thw is empty; a pass needs at least one (t, h, w) row")
    return tuple(out)


def pass_layout(grid_thw: torch.Tensor | Sequence[Sequence[int]], geometry: TowerGeometry) -> PassLayout:
    """Build the index tensors transformers' forward would build for ``grid_thw``, on the host, without padding."""
    return _pass_layout_cached(_grid_rows(grid_thw), geometry)


@functools.lru_cache(maxsize=256)
def _pass_layout_cached(rows: tuple[tuple[int, int, int], ...], geo: TowerGeometry) -> PassLayout:
    m, ws, unit = geo.spatial_merge_size, geo.window_merged, geo.merge_unit
    positions: list[torch.Tensor] = []
    window_parts: list[torch.Tensor] = []
    window_lengths: list[torch.Tensor] = []
    frame_lengths: list[int] = []
    merged_offset = 0
    for t, h, w in rows:
        if h % m or w % m:
            raise ValueError(f"grid (t={t}, h={h}, w={w}): h and w must be multiples of the merge size {m}")
        hh, ww = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        block = (h // m, m, w // m, m)
        pos = torch.stack([hh.reshape(block).transpose(1, 2).flatten(), ww.reshape(block).transpose(1, 2).flatten()])
        positions.append(pos.T.repeat(t, 1))
        frame_lengths += [h * w] * t
        # Merged tokens grouped window by window (row-major windows, row-major inside a window).
        lh, lw = h // m, w // m
        nh, nw = -(-lh // ws), -(-lw // ws)
        index = torch.full((t, nh * ws, nw * ws), -1, dtype=torch.int64)
        index[:, :lh, :lw] = torch.arange(t * lh * lw).reshape(t, lh, lw)
        index = index.reshape(t, nh, ws, nw, ws).permute(0, 1, 3, 2, 4).reshape(t * nh * nw, ws * ws)
        valid = index >= 0
        window_parts.append(index[valid] + merged_offset)
        window_lengths.append(valid.sum(dim=1) * unit)
        merged_offset += t * lh * lw
    window_index = torch.cat(window_parts)
    win_lengths = torch.cat(window_lengths)
    frames = torch.tensor(frame_lengths, dtype=torch.int64)
    return PassLayout(
        position_ids=torch.cat(positions),
        window_index=window_index,
        reverse_index=torch.argsort(window_index),
        cu_seqlens=_cumulative(frames),
        cu_window_seqlens=_cumulative(win_lengths),
        max_seqlen=int(frames.max()),
        max_window_seqlen=int(win_lengths.max()),
    )


def _cumulative(lengths: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)


def pad_segments(cu_seqlens: torch.Tensor, capacity: int) -> torch.Tensor:
    """Extend ``cu_seqlens`` to ``capacity`` segments with zero-length ones (the last offset repeated).

    A varlen kernel launched for ``capacity`` segments then covers any pass with at most that many; the extra
    segments attend to nothing and write nothing.
    """
    segments = int(cu_seqlens.shape[0]) - 1
    if segments > capacity:
        raise ValueError(f"{segments} attention segments exceed the captured capacity of {capacity}")
    return torch.cat([cu_seqlens, cu_seqlens[-1:].expand(capacity - segments)])


# --------------------------------------------------------------------------------------------- attention kernels


def varlen_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_seqlen: int
) -> torch.Tensor:
    """One flash varlen attention call over all segments (CUDA; no host sync, capturable)."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:  # older torch: the aten op it wraps
        out = torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, max_seqlen, max_seqlen, 0.0, False, False)
        return out[0]  # type: ignore[no-any-return]
    out = varlen_attn(q, k, v, cu, cu, max_seqlen, max_seqlen)
    assert isinstance(out, torch.Tensor)  # a tuple only when auxiliary outputs are requested
    return out


def segment_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_seqlen: int) -> torch.Tensor:
    """Reference attention: SDPA per segment (reads ``cu`` on the host, so not capturable). Works on any device."""
    del max_seqlen
    out = torch.empty_like(q)
    bounds = cu.tolist()
    for start, end in itertools.pairwise(bounds):
        if end > start:
            qs, ks, vs = (x[start:end].transpose(0, 1) for x in (q, k, v))  # [heads, L, head_dim]
            out[start:end] = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs).transpose(0, 1)
    return out


def masked_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, max_seqlen: int) -> torch.Tensor:
    """Dense SDPA with a block-diagonal mask built on the device from ``cu`` (capturable, O(P^2) memory and work)."""
    del max_seqlen
    n = q.shape[0]
    segment = torch.searchsorted(cu[1:].to(torch.int64), torch.arange(n, device=q.device), right=True)
    mask = segment[:, None] == segment[None, :]
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask
    )
    return out.transpose(0, 1)


ATTENTION: dict[str, AttentionFn] = {"varlen": varlen_attention, "sdpa_mask": masked_sdpa, "sdpa_loop": segment_sdpa}


# ------------------------------------------------------------------------------------------------ tower forward


@dataclasses.dataclass
class DeviceIndices:
    """A :class:`PassLayout` on the tower's device (maybe with padded segment lists)."""

    position_ids: torch.Tensor
    window_index: torch.Tensor
    reverse_index: torch.Tensor
    cu_seqlens: torch.Tensor
    cu_window_seqlens: torch.Tensor
    max_seqlen: int
    max_window_seqlen: int

    @classmethod
    def from_layout(
        cls,
        layout: PassLayout,
        device: torch.device,
        full_capacity: int | None = None,
        window_capacity: int | None = None,
    ) -> DeviceIndices:
        cu = layout.cu_seqlens if full_capacity is None else pad_segments(layout.cu_seqlens, full_capacity)
        cw = (
            layout.cu_window_seqlens
            if window_capacity is None
            else pad_segments(layout.cu_window_seqlens, window_capacity)
        )
        return cls(
            position_ids=layout.position_ids.to(device),
            window_index=layout.window_index.to(device),
            reverse_index=layout.reverse_index.to(device),
            cu_seqlens=cu.to(device),
            cu_window_seqlens=cw.to(device),
            max_seqlen=layout.max_seqlen,
            max_window_seqlen=layout.max_window_seqlen,
        )

    def load(self, layout: PassLayout, full_capacity: int, window_capacity: int) -> None:
        """Copy a layout into these (static) buffers in place; shapes must match the captured ones."""
        self.position_ids.copy_(layout.position_ids, non_blocking=True)
        self.window_index.copy_(layout.window_index, non_blocking=True)
        self.reverse_index.copy_(layout.reverse_index, non_blocking=True)
        self.cu_seqlens.copy_(pad_segments(layout.cu_seqlens, full_capacity), non_blocking=True)
        self.cu_window_seqlens.copy_(pad_segments(layout.cu_window_seqlens, window_capacity), non_blocking=True)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _block(
    blk: Any,
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cu: torch.Tensor,
    max_seqlen: int,
    attend: AttentionFn,
) -> torch.Tensor:
    attn = blk.attn
    n = x.shape[0]
    qkv = attn.qkv(blk.norm1(x)).reshape(n, 3, attn.num_heads, -1)
    q, k, v = qkv.unbind(1)
    # Rotary in float32, as transformers does, then back to the activation dtype.
    qf, kf = q.float(), k.float()
    q = (qf * cos + _rotate_half(qf) * sin).to(v.dtype)
    k = (kf * cos + _rotate_half(kf) * sin).to(v.dtype)
    o = attend(q, k, v, cu, max_seqlen)
    x = x + attn.proj(o.reshape(n, -1))
    return x + blk.mlp(blk.norm2(x))  # type: ignore[no-any-return]


def tower_forward(
    tower: Tower,
    pixel_values: torch.Tensor,
    idx: DeviceIndices,
    attend: AttentionFn = varlen_attention,
    block_fn: Callable[..., torch.Tensor] = _block,
) -> torch.Tensor:
    """The Qwen2.5-VL vision forward on precomputed indices: ``[P, patch_dim] -> [P / merge_unit, out_hidden]``.

    The same arithmetic as transformers' ``Qwen2_5_VisionTransformerPretrainedModel.forward`` (patch embed, window
    permutation, 2-D rotary, windowed/full blocks, merger, inverse permutation) with no host sync when ``attend``
    has none.
    """
    geo = TowerGeometry.from_tower(tower)
    unit = geo.merge_unit
    x = tower.patch_embed(pixel_values)
    n, hidden = x.shape
    x = x.reshape(n // unit, unit, hidden)[idx.window_index].reshape(n, hidden)
    pos = idx.position_ids.reshape(n // unit, unit, 2)[idx.window_index].reshape(n, 2)
    inv_freq = tower.rotary_pos_emb.inv_freq.float()
    freqs = (pos.float()[..., None] * inv_freq).reshape(n, -1)  # (row freqs, column freqs)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    for layer, blk in enumerate(tower.blocks):
        if layer in geo.fullatt_block_indexes:
            x = block_fn(blk, x, cos, sin, idx.cu_seqlens, idx.max_seqlen, attend)
        else:
            x = block_fn(blk, x, cos, sin, idx.cu_window_seqlens, idx.max_window_seqlen, attend)
    return tower.merger(x)[idx.reverse_index]  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------------------ graph executor

#: Default cap on the image frames one captured pass can hold (see :func:`segment_capacities`).
MAX_FRAMES_PER_PASS = 64


def segment_capacities(
    bucket: int, geometry: TowerGeometry, max_items_per_pass: int | None = None, min_item_patches: int = 64
) -> tuple[int, int]:
    """(frame segments, window segments) a graph captured for ``bucket`` patches is launched with.

    Windows: every window holds at least one merged token, so ``bucket / merge_unit`` always suffices (an empty
    segment costs one early-exiting thread block). Frames: the flash kernel's grid is
    ``ceil(max_seqlen / 128) x segments x heads`` with ``max_seqlen = bucket``, so the frame capacity stays small:
    ``max_items_per_pass`` if given, else ``min(bucket // min_item_patches, MAX_FRAMES_PER_PASS)``, at least 1. A
    pass with more frames runs eagerly.
    """
    if bucket <= 0 or bucket % geometry.merge_unit:
        raise ValueError(f"bucket {bucket} must be a positive multiple of {geometry.merge_unit} patches")
    if max_items_per_pass is not None and max_items_per_pass < 1:
        raise ValueError(f"max_items_per_pass={max_items_per_pass} must be >= 1")
    items = max_items_per_pass or min(max(1, bucket // min_item_patches), MAX_FRAMES_PER_PASS)
    return items, bucket // geometry.merge_unit


@dataclasses.dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    pixels: torch.Tensor
    idx: DeviceIndices
    out: torch.Tensor
    full_capacity: int
    window_capacity: int


class CudaGraphExecutor:
    """A :class:`~vllm_hpu_mm.graphs.base.PassExecutor` replaying one CUDA graph per bucket.

    ``max_items_per_pass`` bounds the image frames a pass may hold (see :meth:`capacities`). A pass that exceeds
    it, or a bucket that was not warmed up, runs eagerly (same function, no graph) and is counted in
    :attr:`eager_passes`.
    """

    name = "cuda"

    def __init__(
        self,
        tower: Tower,
        *,
        attention: str = "varlen",
        max_items_per_pass: int | None = None,
        min_item_patches: int = 64,
        shared_pool: bool = True,
        compile_blocks: bool = False,
    ) -> None:
        """``compile_blocks``: ``torch.compile`` each block's body (fuses RMSNorm, rotary, SiLU*up and residuals;
        the varlen attention is a custom op inside the compiled graph) before capture. Costs a compile per bucket
        at warm-up."""
        if not torch.cuda.is_available():
            raise BackendError("the CUDA graph backend needs a CUDA device; torch.cuda.is_available() is False")
        device = next(tower.parameters()).device
        if device.type != "cuda":
            raise BackendError(f"the vision tower is on {device}; move it to a CUDA device before capturing graphs")
        if attention not in ATTENTION or attention == "sdpa_loop":
            raise BackendError(f"attention={attention!r} cannot be captured; accepted: 'varlen', 'sdpa_mask'")
        if min_item_patches < 4:
            raise ValueError(f"min_item_patches={min_item_patches} must be >= 4 (one merged token)")
        self.dtype = tower.patch_embed.proj.weight.dtype
        if attention == "varlen" and self.dtype not in (torch.float16, torch.bfloat16):
            raise BackendError(
                f"attention='varlen' (flash) needs a float16 or bfloat16 tower, this one is {self.dtype}; "
                "cast the tower or use attention='sdpa_mask'"
            )
        self.tower = tower
        self.device = device
        self.geometry = TowerGeometry.from_tower(tower)
        self.attend = ATTENTION[attention]
        self.max_items_per_pass = max_items_per_pass
        self.min_item_patches = min_item_patches
        self.pool: Any = torch.cuda.graph_pool_handle() if shared_pool else None
        self.stream = torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]
        self.block_fn: Callable[..., torch.Tensor] = _block
        if compile_blocks:
            # One compiled block per (bucket, full/window) pair, all sharing _block's code object: raise dynamo's
            # per-code recompile limit (default 8) so the later buckets do not silently fall back to eager.
            dynamo_config: Any = torch._dynamo.config
            dynamo_config.recompile_limit = max(int(dynamo_config.recompile_limit), 256)
            self.block_fn = torch.compile(_block, dynamic=False)
        self.graphs: dict[int, _Captured] = {}
        self.eager_passes = 0

    def capacities(self, bucket: int) -> tuple[int, int]:
        """Segment capacities (image frames, windows) captured for ``bucket``: see :func:`segment_capacities`."""
        return segment_capacities(bucket, self.geometry, self.max_items_per_pass, self.min_item_patches)

    @property
    def captured_buckets(self) -> tuple[int, ...]:
        return tuple(sorted(self.graphs))

    def warmup(self, bucket: int, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> None:
        """Capture ``bucket``'s graph. Call largest bucket first so later, smaller graphs reuse the shared pool."""
        if bucket in self.graphs:
            return
        layout = self._layout(bucket, pixel_values, grid_thw)
        full_cap, win_cap = self.capacities(bucket)
        if layout.full_segments > full_cap or layout.window_segments > win_cap:
            raise BackendError(f"warm-up pass for bucket {bucket} exceeds its segment capacity ({full_cap}, {win_cap})")
        pixels = torch.empty((bucket, pixel_values.shape[1]), dtype=self.dtype, device=self.device)
        pixels.copy_(pixel_values, non_blocking=True)
        idx = DeviceIndices.from_layout(layout, self.device, full_cap, win_cap)
        idx.max_seqlen = bucket  # any composition: the kernel grid covers the longest possible segment
        idx.max_window_seqlen = self.geometry.max_window_patches
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.inference_mode():
                self.stream.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(self.stream):  # warm-up run: lazy init, autotuning, cuBLAS handles
                    self._forward(pixels, idx)
                self.stream.synchronize()
                with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
                    out = self._forward(pixels, idx)
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        except torch.cuda.OutOfMemoryError as e:
            raise BackendError(f"out of device memory while capturing the graph for bucket {bucket}: {e}") from e
        self.graphs[bucket] = _Captured(graph, pixels, idx, out, full_cap, win_cap)
        logger.debug("captured CUDA graph for bucket %d (capacities %d, %d)", bucket, full_cap, win_cap)

    def __call__(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        layout = self._layout(bucket, pixel_values, grid_thw)
        cap = self.graphs.get(bucket) if bucket is not None else None
        if cap is None or layout.full_segments > cap.full_capacity or layout.window_segments > cap.window_capacity:
            self.eager_passes += 1
            with torch.inference_mode():
                return self._forward(pixel_values.to(self.device), DeviceIndices.from_layout(layout, self.device))
        cap.pixels.copy_(pixel_values, non_blocking=True)
        cap.idx.load(layout, cap.full_capacity, cap.window_capacity)
        cap.graph.replay()
        # The graph's output buffer is overwritten by the next replay of any graph sharing the pool: hand out a copy.
        return cap.out.clone()

    def _forward(self, pixels: torch.Tensor, idx: DeviceIndices) -> torch.Tensor:
        return tower_forward(self.tower, pixels, idx, self.attend, self.block_fn)

    def _layout(self, bucket: int | None, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> PassLayout:
        layout = pass_layout(grid_thw, self.geometry)
        if pixel_values.shape[0] != layout.patches:
            raise ValueError(f"pixel_values has {pixel_values.shape[0]} rows but grid_thw covers {layout.patches}")
        if bucket is not None and layout.patches != bucket:
            raise ValueError(f"a pass for bucket {bucket} must hold exactly {bucket} patches; got {layout.patches}")
        return layout
