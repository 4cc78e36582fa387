"""A held-out run's figures against the prediction at the speeds the re-probes around it measured."""

from tests.support.latency_check import Row


def _row(measured: float, lo: float, hi: float) -> Row:
    return Row("r", "t", 1.0, {"p50_ttft_ms": measured}, {"p50_ttft_ms": (lo + hi) / 2},
               bracket={"p50_ttft_ms": (lo, hi)})  # fmt: skip


def test_a_figure_between_the_predictions_at_the_two_speeds_is_in_the_bracket() -> None:
    assert _row(150.0, 100.0, 200.0).in_bracket("p50_ttft_ms", 0.15)


def test_the_bracket_is_widened_by_the_bound_on_either_side_and_no_further() -> None:
    assert _row(88.0, 100.0, 200.0).in_bracket("p50_ttft_ms", 0.15)  # 100 / 1.15 = 87
    assert not _row(86.0, 100.0, 200.0).in_bracket("p50_ttft_ms", 0.15)
    assert _row(234.0, 200.0, 100.0).in_bracket("p50_ttft_ms", 0.15)  # 200 / 0.85 = 235, either order
    assert not _row(236.0, 100.0, 200.0).in_bracket("p50_ttft_ms", 0.15)


def test_a_figure_without_a_bracket_or_a_measurement_is_not_in_it() -> None:
    assert not Row("r", "t", 1.0, {}, {}).in_bracket("p50_ttft_ms", 0.15)
    assert not _row(0.0, 100.0, 200.0).in_bracket("p50_ttft_ms", 0.15)
