"""The embedded default traffic: 7,500 requests, ``vllm_hpu_mm/data/default_traffic.csv`` (built by
``benchmarks/fits/traffic_sources.py``; sources in ``vllm_hpu_mm/data/README.md``).

- images: every COCO val2017 and MathVista testmini image once (6,000), the sizes the vision buckets plan over;
- text-only requests: 20% of the total (1,500), an assumption;
- text and answer tokens: (prompt, answer) pairs of the Azure LLM inference trace 2023, chat part (19,366 requests);
- prefix-cache tokens: the share of each prompt an unbounded prefix cache held in the Mooncake FAST'25 conversation
  trace (12,031 requests), applied to the text.

It stands for traffic nobody described: plan over your own (``--sizes``, ``--plan-sizes``, ``--from-metrics``).
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

from vllm_hpu_mm.traffic.csvfile import parse_rows
from vllm_hpu_mm.traffic.requests import TextRow, Traffic

__all__ = ["DEFAULT_TRAFFIC_FILE", "default_text", "default_traffic"]

DEFAULT_TRAFFIC_FILE = "default_traffic.csv"
SOURCE = (
    "embedded default traffic (7500 requests: COCO val2017 + MathVista testmini images, 20% text-only, text and "
    "answers of the Azure LLM inference trace 2023, prefix hits of the Mooncake conversation trace)"
)


@functools.cache
def default_traffic() -> Traffic:
    text = resources.files("vllm_hpu_mm").joinpath("data").joinpath(DEFAULT_TRAFFIC_FILE).read_text(encoding="utf-8")
    counts, _, _ = parse_rows(csv.reader(io.StringIO(text)), DEFAULT_TRAFFIC_FILE)
    return Traffic(dict(counts), SOURCE)


@functools.cache
def default_text() -> Mapping[TextRow, int]:
    """The default traffic's (text, output, cached) distribution: what requests without text columns draw from
    (read-only, counted once: every schedule of a plan asks for it)."""
    return MappingProxyType(default_traffic().text_rows())
