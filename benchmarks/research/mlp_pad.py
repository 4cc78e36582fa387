"""Research code, not served: zero-pad a vision MLP's intermediate size to a multiple of 64 at load time — the same
function, faster GEMMs on an H100 (``performance/results/vision_encoder_h100.md``, columns ``MLP-padded``). Nothing in
the package imports it: the CUDA server runs vLLM's tower and encoder graphs, where this was not measured.

Qwen2.5-VL's vision MLP is ``down(silu(gate(x)) * up(x))`` with an intermediate size of 3420, not a multiple of 8,
so cuBLAS picks slower kernels for all three GEMMs. Adding
``k`` intermediate channels whose gate and up rows and biases are zero gives ``silu(0) * 0 = 0`` in each, and zero
columns in ``down`` add nothing: the output is mathematically unchanged, and only the GEMM kernels (and so bf16
rounding order) differ.

Two layouts are handled:

- transformers' ``Qwen2_5_VLMLP``: separate ``gate_proj`` / ``up_proj`` / ``down_proj`` ``nn.Linear``;
- vLLM's ``Qwen2_5_VisionMLP``: one merged ``gate_up_proj`` (gate rows then up rows, per tensor-parallel shard)
  and ``down_proj``; the padded channels are added to each shard's halves and the layers' size attributes updated.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

#: Pad to this many channels: a multiple of 64 keeps every GEMM dimension on cuBLAS' fast tile paths.
DEFAULT_MULTIPLE = 64


def padded_size(size: int, multiple: int = DEFAULT_MULTIPLE) -> int:
    """``size`` rounded up to a multiple of ``multiple``."""
    if size <= 0 or multiple <= 0:
        raise ValueError(f"size ({size}) and multiple ({multiple}) must be positive")
    return -(-size // multiple) * multiple


def _pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    return torch.cat([t, t.new_zeros((rows, *t.shape[1:]))])


def _set(layer: nn.Module, name: str, value: torch.Tensor | None) -> None:
    if value is not None:
        old = getattr(layer, name)
        new = nn.Parameter(value, requires_grad=old.requires_grad)
        for key, attr in vars(old).items():  # vLLM's weight-loader attributes travel with the parameter
            setattr(new, key, attr)
        setattr(layer, name, new)


def pad_hf_mlp(mlp: nn.Module, multiple: int = DEFAULT_MULTIPLE) -> int:
    """Pad a transformers MLP (``gate_proj``, ``up_proj``, ``down_proj`` Linears) in place; return the new size."""
    gate: Any = mlp.gate_proj
    up: Any = mlp.up_proj
    down: Any = mlp.down_proj
    size = int(gate.out_features)
    if up.out_features != size or down.in_features != size:
        raise ValueError(f"inconsistent MLP: gate {size}, up {up.out_features}, down in {down.in_features}")
    target = padded_size(size, multiple)
    extra = target - size
    if extra == 0:
        return size
    with torch.no_grad():
        for layer in (gate, up):
            _set(layer, "weight", _pad_rows(layer.weight.data, extra))
            _set(layer, "bias", None if layer.bias is None else _pad_rows(layer.bias.data, extra))
            layer.out_features = target
        _set(down, "weight", _pad_rows(down.weight.data.T, extra).T.contiguous())
        down.in_features = target
    if hasattr(mlp, "intermediate_size"):
        module: Any = mlp
        module.intermediate_size = target
    return target


def pad_vllm_mlp(mlp: nn.Module, multiple: int = DEFAULT_MULTIPLE) -> int:
    """Pad a vLLM vision MLP (merged ``gate_up_proj``, ``down_proj``) in place, per tensor-parallel shard.

    Call after the weights are loaded (the loaders expect the checkpoint's shapes). Returns the new per-shard
    intermediate size. Unquantized weights only: a quantized layer keeps its packed layout and is refused.
    """
    gate_up: Any = mlp.gate_up_proj
    down: Any = mlp.down_proj
    for layer in (gate_up, down):
        method = type(getattr(layer, "quant_method", None)).__name__
        if method not in ("NoneType", "UnquantizedLinearMethod"):
            raise ValueError(f"cannot pad a quantized vision MLP ({method}); run without MLP padding")
    rows = int(gate_up.weight.shape[0])
    if rows % 2:
        raise ValueError(f"gate_up_proj has {rows} rows; expected gate and up halves of equal size")
    size = rows // 2
    if int(down.weight.shape[1]) != size:
        raise ValueError(f"inconsistent MLP shard: gate/up {size} each, down_proj input {down.weight.shape[1]}")
    target = padded_size(size, multiple)
    extra = target - size
    if extra == 0:
        return size
    with torch.no_grad():
        w_gate, w_up = gate_up.weight.data.split(size)
        _set(gate_up, "weight", torch.cat([_pad_rows(w_gate, extra), _pad_rows(w_up, extra)]))
        if getattr(gate_up, "bias", None) is not None:
            b_gate, b_up = gate_up.bias.data.split(size)
            _set(gate_up, "bias", torch.cat([_pad_rows(b_gate, extra), _pad_rows(b_up, extra)]))
        _set(down, "weight", _pad_rows(down.weight.data.T, extra).T.contiguous())
    # Size bookkeeping that vLLM's linear layers keep (present on the real classes, absent on plain modules).
    if hasattr(gate_up, "output_size_per_partition"):
        gate_up.output_size_per_partition = 2 * target
    if hasattr(gate_up, "output_partition_sizes"):
        gate_up.output_partition_sizes = [target, target]
    if hasattr(down, "input_size_per_partition"):
        down.input_size_per_partition = target
    return target


def pad_vision_mlps(tower: nn.Module, multiple: int = DEFAULT_MULTIPLE) -> int:
    """Pad every vision MLP in ``tower`` (transformers' or vLLM's layout); return how many were padded.

    Idempotent: an MLP already at a multiple of ``multiple`` is left alone (and not counted).
    """
    padded = 0
    module: Any
    for module in tower.modules():
        if hasattr(module, "gate_up_proj") and hasattr(module, "down_proj"):
            before = int(module.gate_up_proj.weight.shape[0]) // 2
            padded += pad_vllm_mlp(module, multiple) != before
        elif all(hasattr(module, n) for n in ("gate_proj", "up_proj", "down_proj")):
            before = int(module.gate_proj.out_features)
            padded += pad_hf_mlp(module, multiple) != before
    return padded
