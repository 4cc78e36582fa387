"""``--since``: the traffic a server counted between two of its pages is the later page's counts less the earlier
one's, value by value (as Prometheus' ``increase``); a count that went down (a restart, another server) is one
ConfigError, never a negative weight."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.buckets.live import traffic_from_metrics
from vllm_hpu_mm.errors import ConfigError

EDGES = ("50.0", "100.0", "200.0", "500.0", "1000.0", "2000.0", "+Inf")
MIDPOINTS = (25, 75, 150, 350, 750, 1500, 2000)  # the open top bucket stands at its lower edge


def page(per_bucket: list[int], hits: int = 0, queries: int | None = None) -> str:
    lines, total = [], 0
    for le, n in zip(EDGES, per_bucket, strict=True):
        total += n
        lines.append(f'vllm:request_prompt_tokens_bucket{{le="{le}"}} {total}')
    lines.append(f"vllm:prefix_cache_queries_total {100 * total if queries is None else queries}")
    lines.append(f"vllm:prefix_cache_hits_total {hits}")
    return "\n".join(lines) + "\n"


counts = st.lists(st.integers(0, 50), min_size=len(EDGES), max_size=len(EDGES))


@settings(max_examples=40, deadline=None)
@given(earlier=counts, added=counts)
def test_the_window_holds_exactly_what_came_after(tmp_path_factory: pytest.TempPathFactory, earlier: list[int],
                                                   added: list[int]) -> None:  # fmt: skip
    folder = tmp_path_factory.mktemp("since")
    before, after = folder / "before.txt", folder / "after.txt"
    before.write_text(page(earlier))
    after.write_text(page([a + b for a, b in zip(earlier, added, strict=True)]))
    if not any(added):
        with pytest.raises(ConfigError, match="no request counted since --since"):
            traffic_from_metrics(str(after), since=str(before))
        return
    window = traffic_from_metrics(str(after), since=str(before))
    assert window.text is not None
    share = dict.fromkeys(MIDPOINTS, 0)
    for (prompt, _, _), weight in window.text.items():
        share[prompt] += weight
    seen = {p for p, w in share.items() if w}
    assert seen == {p for p, n in zip(MIDPOINTS, added, strict=True) if n}
    assert window.num_requests == sum(added)


def test_a_count_that_went_down_is_refused(tmp_path: Path) -> None:
    later, earlier = tmp_path / "later.txt", tmp_path / "earlier.txt"
    later.write_text(page([5, 5, 0, 0, 0, 0, 0], queries=2000))
    earlier.write_text(page([6, 5, 0, 0, 0, 0, 0], queries=1000))  # more short prompts "before": a restart between
    with pytest.raises(ConfigError, match=r"^--since .*earlier.txt: vllm:request_prompt_tokens counted more there"):
        traffic_from_metrics(str(later), since=str(earlier))
    later.write_text(page([6, 5, 0, 0, 0, 0, 0], hits=10, queries=2000))
    earlier.write_text(page([6, 5, 0, 0, 0, 0, 0], hits=20, queries=1000))
    with pytest.raises(ConfigError, match="vllm:prefix_cache_queries or vllm:prefix_cache_hits counted more there"):
        traffic_from_metrics(str(later), since=str(earlier))
    with pytest.raises(ConfigError, match=r"^--since .*missing.txt: cannot read it"):  # not --from-metrics
        traffic_from_metrics(str(later), since=str(tmp_path / "missing.txt"))


def test_the_prefix_cache_share_is_the_windows_own(tmp_path: Path) -> None:
    before, after = tmp_path / "before.txt", tmp_path / "after.txt"
    before.write_text(page([10, 0, 0, 0, 0, 0, 0], hits=1000))  # 1000 of 1000 queried tokens hit before
    after.write_text(page([10, 10, 0, 0, 0, 0, 0], hits=1000))  # and none of the 1000 queried since
    window = traffic_from_metrics(str(after), since=str(before))
    assert window.text is not None
    assert all(cached == 0 for _, _, cached in window.text)
    whole = traffic_from_metrics(str(after))
    assert whole.text is not None
    assert any(cached > 0 for _, _, cached in whole.text)
