"""Alignment modes of the image preprocessor (kept apart so the env registry can import them cheaply)."""

from __future__ import annotations

import enum


class AlignMode(str, enum.Enum):
    """How an image reaches a 112-pixel-aligned size."""

    #: Resize to the nearest 112-multiple grid, aspect ratio kept as closely as possible (Qwen's rule, factor 112).
    NEAREST = "nearest"
    #: Resize down to the 112-multiple grid at or below the image: never bills more tokens than the stock rule.
    DOWN = "down"
    #: Keep every pixel as it is and pad the canvas up to the next 112 multiple (for text-heavy images).
    PAD = "pad"
