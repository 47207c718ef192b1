"""Wall-clock A/B timing of whole steps (device-agnostic; no torch import).

`time_ab` alternates the two step functions (ABAB..., then BABA... on odd repeats, so that
clock drift and thermal state hit both), synchronising before and after each block of
`steps` calls; each repeat gives one time per step. The summary is the median and the
interquartile range (IQR) of the repeats. A verdict is given only when the two IQRs do not
overlap: a difference inside the spread between repeats is noise.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

FASTER, SLOWER, NOISE = "good faster", "good slower", "no difference beyond the spread"
MIN_REPEATS, MIN_STEPS = 7, 50


@dataclass(frozen=True)
class Stats:
    """Seconds per step, one sample per repeat."""

    samples: tuple[float, ...]

    def _quartiles(self) -> tuple[float, float, float]:
        data = sorted(self.samples)
        if len(data) == 1:
            return data[0], data[0], data[0]
        q1, median, q3 = statistics.quantiles(data, n=4, method="inclusive")
        return q1, median, q3

    @property
    def median(self) -> float:
        return self._quartiles()[1]

    @property
    def q1(self) -> float:
        return self._quartiles()[0]

    @property
    def q3(self) -> float:
        return self._quartiles()[2]

    @property
    def iqr(self) -> float:
        q1, _, q3 = self._quartiles()
        return q3 - q1

    def to_json(self) -> dict[str, Any]:
        us = 1e6
        return {
            "median_us": round(self.median * us, 3), "q1_us": round(self.q1 * us, 3),
            "q3_us": round(self.q3 * us, 3), "iqr_us": round(self.iqr * us, 3),
            "samples_us": [round(s * us, 3) for s in self.samples],
        }


@dataclass(frozen=True)
class ABResult:
    bad: Stats
    good: Stats
    repeats: int
    steps: int

    @property
    def speedup(self) -> float:
        """bad / good median step time (> 1: the good form is faster)."""
        return self.bad.median / self.good.median if self.good.median > 0 else float("nan")

    @property
    def verdict(self) -> str:
        return verdict(self.bad, self.good)

    def to_json(self) -> dict[str, Any]:
        return {
            "bad": self.bad.to_json(), "good": self.good.to_json(), "repeats": self.repeats,
            "steps": self.steps, "speedup": round(self.speedup, 4), "verdict": self.verdict,
        }


def verdict(bad: Stats, good: Stats) -> str:
    """A verdict only when the interquartile ranges are disjoint."""
    if good.q3 < bad.q1:
        return FASTER
    if bad.q3 < good.q1:
        return SLOWER
    return NOISE


def time_block(step: Callable[[], Any], steps: int, synchronize: Callable[[], None]) -> float:
    """Seconds per step over `steps` calls, synchronised at both ends."""
    synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    return (time.perf_counter() - start) / steps


def time_ab(bad: Callable[[], Any], good: Callable[[], Any], synchronize: Callable[[], None], *,
            repeats: int = MIN_REPEATS, steps: int = MIN_STEPS, warmup: int = 10) -> ABResult:
    """Alternate the two steps: `repeats` blocks of `steps` each, after `warmup` calls of both."""
    for _ in range(warmup):
        bad()
        good()
    synchronize()
    times: dict[str, list[float]] = {"bad": [], "good": []}
    for repeat in range(repeats):
        order = (("bad", bad), ("good", good)) if repeat % 2 == 0 else (("good", good), ("bad", bad))
        for name, step in order:
            times[name].append(time_block(step, steps, synchronize))
    return ABResult(Stats(tuple(times["bad"])), Stats(tuple(times["good"])), repeats, steps)
