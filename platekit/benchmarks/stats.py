"""Ratios measured pair by pair, their median and how far it can be trusted.

Two loops run in turn, A B A B ..., and each pair gives one ratio; a machine whose speed
drifts moves both runs of a pair alike. The median of the ratios is quoted with a
distribution-free confidence interval (order statistics of a binomial, no assumption
about the noise's shape). A target is met when the whole interval clears it, missed
when the whole interval falls short, and otherwise the figures cannot tell: more pairs
narrow the interval, a quieter machine narrows each ratio.
"""

import math
import statistics
from dataclasses import dataclass

CONFIDENCE = 0.95
MET, MISSED, INCONCLUSIVE = "met", "missed", "inconclusive"


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """An interval holding the true median with probability >= ``confidence``.

    It is ``[x_(k), x_(n+1-k)]`` of the sorted values, with the largest ``k`` whose two
    tails of Binomial(n, 1/2) below ``k`` add up to at most ``1 - confidence``. Fewer than
    6 values (at 95 %) cannot give one: the interval is then unbounded.
    """
    ordered = sorted(values)
    n = len(ordered)
    tail, k = 0.0, 0
    while k < n // 2:
        tail += math.comb(n, k) / 2**n
        if 2 * tail > 1 - confidence:
            break
        k += 1
    if k == 0:
        return -math.inf, math.inf
    return ordered[k - 1], ordered[n - k]


@dataclass(frozen=True)
class PairedRatio:
    """The median of pairwise ratios, its interval, and a verdict against ``target``."""

    median: float
    low: float
    high: float
    pairs: int
    verdict: str

    @classmethod
    def of(cls, ratios: list[float], target: float | None = None) -> "PairedRatio":
        """``ratios`` judged against ``target`` (higher is better); no target: no verdict."""
        low, high = median_interval(ratios)
        if target is None:
            verdict = ""
        elif low >= target:
            verdict = MET
        elif high < target:
            verdict = MISSED
        else:
            verdict = INCONCLUSIVE
        return cls(statistics.median(ratios), low, high, len(ratios), verdict)

    def interval(self) -> str:
        """``0.981-1.043`` or, with too few pairs for one, ``none yet (n pairs)``."""
        if math.isinf(self.low):
            return f"no interval from {self.pairs} pairs (6 or more give one)"
        return f"{self.low:.3f}-{self.high:.3f}"
