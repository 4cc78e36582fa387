"""Fitting the doctor's :class:`~vllm_hpu_mm.logs.doctor.decide.Rules` on labelled logs, and cross-validating the fit.

What is fitted is what the runtimes' sources do not settle: the order in which the kinds of evidence are trusted when
they disagree, how close to the end of a log a cut must be, and votes for frame names the phase table does not know.
What a frame or a log line means (:mod:`vllm_hpu_mm.logs.doctor.phases`, :mod:`vllm_hpu_mm.logs.patterns`) is read
from the sources and is not fitted. The shipped rules (``vllm_hpu_mm/data/doctor_rules.json``) are fitted here, on the
whole development set; the doctor only reads them.

:func:`cross_validate` makes the accuracy figure honest: the logs are dealt into ``k`` folds stratified by label;
each fold is scored with rules fitted on the other folds only; the deal is repeated with other seeds. Everything is
deterministic for a given seed.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import Counter
from collections.abc import Sequence

from vllm_hpu_mm.logs.doctor.decide import Rules, Source, frame_tokens, judge
from vllm_hpu_mm.logs.doctor.scan import LogFeatures
from vllm_hpu_mm.values import STAGES

__all__ = ["CrossValidation", "Example", "cross_validate", "fit", "folds"]

#: A labelled log: its name, its features, the stage a person read in it.
Example = tuple[str, LogFeatures, str]

#: The choices :func:`fit` tries, the defaults first (ties keep the earlier choice).
ORDERS: tuple[tuple[Source, ...], ...] = tuple(itertools.permutations(Rules().order))
CUT_LINES = (5, 2, 10, 25)
CUT_TRACEBACKS = (True, False)
MIN_VOTES = (2, 1, 3)
PHASE_CUTS = (-1, 0, 2, 5)


def _votes(examples: Sequence[Example]) -> dict[str, dict[str, int]]:
    votes: dict[str, Counter[str]] = {}
    for _, features, label in examples:
        if label not in STAGES:
            continue
        run = features.run
        tb = run.open_traceback
        frames = run.failure.frames if run.failure is not None else tb.frames if tb is not None else ()
        for token in frame_tokens(frames):
            votes.setdefault(token, Counter())[label] += 1
    return {t: dict(c) for t, c in votes.items()}


def fit(examples: Sequence[Example]) -> Rules:
    """The rules that get the most of ``examples`` right: frame votes counted over them, then every order, cut
    distance, whether cut tracebacks count, vote threshold and phase-cut distance tried (ties keep the earlier,
    default, choice)."""
    votes = _votes(examples)
    best: tuple[int, Rules] | None = None
    grid = itertools.product(ORDERS, CUT_LINES, CUT_TRACEBACKS, MIN_VOTES, PHASE_CUTS)
    for order, cut_lines, cut_tracebacks, min_votes, phase_cut in grid:
        rules = Rules(order, cut_lines, cut_tracebacks, votes, min_votes, phase_cut)
        right = sum(judge(features, rules).stage == label for _, features, label in examples)
        if best is None or right > best[0]:
            best = (right, rules)
    assert best is not None
    return best[1]


def folds(labels: Sequence[str], k: int, seed: int) -> list[list[int]]:
    """``k`` folds of the indices of ``labels``, stratified: each label's indices shuffled (by ``seed``) and dealt
    round-robin, continuing from fold to fold, so every fold gets its share of every label."""
    rng = random.Random(seed)
    out: list[list[int]] = [[] for _ in range(k)]
    turn = 0
    for label in sorted(set(labels)):
        members = [i for i, x in enumerate(labels) if x == label]
        rng.shuffle(members)
        for i in members:
            out[turn % k].append(i)
            turn += 1
    return [sorted(fold) for fold in out]


@dataclasses.dataclass(frozen=True)
class CrossValidation:
    k: int
    repeats: int
    seed: int
    #: Share right per repetition (each log scored once per repetition, by rules fitted without it).
    accuracies: tuple[float, ...]
    #: Per log (in the order given): the stage predicted in each repetition.
    predictions: tuple[tuple[str, ...], ...]
    labels: tuple[str, ...]
    names: tuple[str, ...]

    @property
    def accuracy(self) -> float:
        return sum(self.accuracies) / len(self.accuracies)

    @property
    def false_alarms(self) -> int:
        """Predictions of a failure on a log labelled ``none``, over all repetitions."""
        pairs = zip(self.labels, self.predictions, strict=True)
        return sum(p != "none" for label, ps in pairs for p in ps if label == "none")

    def confusion(self) -> dict[tuple[str, str], int]:
        """(label, predicted) -> count over all repetitions."""
        return dict(Counter((label, p) for label, ps in zip(self.labels, self.predictions, strict=True) for p in ps))


def cross_validate(examples: Sequence[Example], k: int = 5, repeats: int = 10, seed: int = 0) -> CrossValidation:
    """Repeated stratified ``k``-fold cross-validation of :func:`fit` on ``examples``."""
    labels = [label for _, _, label in examples]
    predictions: list[list[str]] = [[] for _ in examples]
    accuracies = []
    for r in range(repeats):
        right = 0
        for test in folds(labels, k, seed + r):
            held = set(test)
            rules = fit([ex for i, ex in enumerate(examples) if i not in held])
            for i in test:
                stage = judge(examples[i][1], rules).stage
                predictions[i].append(stage)
                right += stage == labels[i]
        accuracies.append(right / len(examples))
    return CrossValidation(k, repeats, seed, tuple(accuracies), tuple(tuple(p) for p in predictions), tuple(labels),
                           tuple(name for name, _, _ in examples))  # fmt: skip
