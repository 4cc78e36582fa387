"""Fitting the doctor's rules without some logs (the cross-validations of benchmarks/fits/doctor_accuracy.py):
``fit_leaving_out`` takes the left-out logs' answers off scores counted once, and must fit exactly what a refit on
the logs that remain fits."""

from __future__ import annotations

import random

import pytest

from benchmarks.common import Example, fit, fit_leaving_out, vote_tokens
from tests.support.logs import DEVELOPMENT_LOGS, HELDOUT_LOGS, examples


@pytest.fixture(scope="module")
def labelled() -> list[Example]:
    return examples([*DEVELOPMENT_LOGS, *HELDOUT_LOGS])


def _groups(labelled: list[Example]) -> list[list[int]]:
    rng = random.Random(0)
    casting = [i for i, ex in enumerate(labelled) if vote_tokens(ex)]
    silent = [i for i, ex in enumerate(labelled) if not vote_tokens(ex)]
    # logs whose frame votes the fit counts (leaving one out changes every candidate's votes), logs that cast none,
    # and a fold of each kind
    return [*([i] for i in rng.sample(casting, 3)), *([i] for i in rng.sample(silent, 2)), casting[:4],
            rng.sample(range(len(labelled)), 15)]  # fmt: skip


@pytest.mark.parametrize("evidence", [(True, False), (False,)])
def test_leaving_logs_out_fits_what_a_refit_without_them_fits(
    labelled: list[Example], evidence: tuple[bool, ...]
) -> None:
    groups = _groups(labelled)
    fast = fit_leaving_out(labelled, groups, evidence=evidence)
    for group, rules in zip(groups, fast, strict=True):
        left = set(group)
        assert rules == fit([ex for i, ex in enumerate(labelled) if i not in left], evidence=evidence), group


def test_leaving_out_a_voting_log_takes_its_votes_away(labelled: list[Example]) -> None:
    voter = next(i for i, ex in enumerate(labelled) if vote_tokens(ex))
    (without,) = fit_leaving_out(labelled, [[voter]])
    votes = fit(labelled).votes
    token = next(iter(vote_tokens(labelled[voter])))
    label = labelled[voter][2]
    assert without.votes.get(token, {}).get(label, 0) == votes[token][label] - 1
