"""Alignment modes of the image preprocessor (defined in :mod:`vllm_hpu_mm.values`, which the environment registry
imports without loading the preprocessor)."""

from __future__ import annotations

from vllm_hpu_mm.values import AlignMode

__all__ = ["AlignMode"]
