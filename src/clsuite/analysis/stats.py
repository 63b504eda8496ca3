"""Statistics over seeds: per-cell mean, sample std and n; paired differences with an interval
and tests (scipy). What each returns and assumes: docs/GUIDE.md, "Statistics over seeds".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import integrate, stats

from clsuite.core.metrics import QUANTITIES

CONDITIONS = ("memory", "tau", "lambda")  # the swept conditions of the paper's figures
KEYS = ("benchmark", "method", "reading", *CONDITIONS, "variant")  # one table cell = one value of KEYS
COSTS = {  # what a run cost (its results file's keys) and their columns in the tables
    "wall_time_s": "wall time (s)",
    "train_time_s": "training time (s)",
    "peak_ram_mb": "peak RAM (MB)",
    "peak_gpu_mb": "peak GPU memory (MB)",
}

LEVEL = 0.95
EXACT_UP_TO = 16  # seeds; above, the sign-flip test draws 2^16 random sign patterns


def summarize(runs: pd.DataFrame, keys=KEYS) -> pd.DataFrame:
    """Mean, sample std (ddof = 1) and n of every quantity per value of ``keys``, rows in the order of
    the keys' values (M as a number: 50, 100, 200)."""
    cols = [*QUANTITIES, *COSTS]
    keys = list(keys)
    if runs.empty:
        return pd.DataFrame(columns=[*keys, "n", *[f"{c}_{s}" for c in cols for s in ("mean", "std")]])
    g = runs.groupby(keys, dropna=False, sort=True)
    out = g[cols].agg(["mean", "std"])
    out.columns = [f"{a}_{b}" for a, b in out.columns]
    out.insert(0, "n", g.size())
    return out.reset_index()


def n_range(ns) -> str:
    """The seeds of several cells: ``10``, or ``5–10`` where they differ (``–``: none)."""
    ns = sorted({int(n) for n in ns})
    return "–" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"


@dataclass(frozen=True)
class Paired:
    """The per-seed difference of two arms: its mean, interval and tests."""

    n: int
    mean: float
    sd: float
    low: float
    high: float
    p_t: float
    p_signflip: float
    level: float = LEVEL

    @property
    def defined(self) -> bool:
        return self.n >= 2 and not math.isnan(self.low)

    @property
    def p_below(self) -> float:
        """One-sided paired t-test p for mean(d) < 0 (H0: mean(d) >= 0): P(T_{n-1} <= mean / (sd / sqrt(n))).

        NaN without an interval; every seed the same difference (sd = 0): 0 if it is negative, else 1.
        """
        if not self.defined:
            return float("nan")
        if self.sd == 0.0:
            return 0.0 if self.mean < 0 else 1.0
        return float(stats.t.cdf(self.mean / (self.sd / math.sqrt(self.n)), self.n - 1))

    def bounds(self, level: float) -> tuple[float, float]:
        """The two-sided Student-t interval of the mean difference at ``level`` (0.90: the interval whose
        inside is TOST's equivalence at 0.05 each side); NaN without an interval."""
        if not self.defined:
            return float("nan"), float("nan")
        half = float(stats.t.ppf(0.5 + level / 2, self.n - 1)) * self.sd / math.sqrt(self.n)
        return self.mean - half, self.mean + half

    def p_equivalent(self, margin: float) -> float:
        """Two one-sided tests (TOST; Schuirmann 1987) of H0: |mean(d)| >= ``margin``: the larger of the paired
        t-test p for d > -margin, P(T_{n-1} >= (mean + margin) / se), and for d < margin,
        P(T_{n-1} <= (mean - margin) / se), se = sd / sqrt(n). Below alpha exactly when the (1 - 2 alpha)
        interval lies inside (-margin, margin).

        NaN without an interval or a margin; every seed the same difference (sd = 0): 0 if it is inside, else 1.
        """
        if not self.defined or not margin > 0:
            return float("nan")
        if self.sd == 0.0:
            return 0.0 if abs(self.mean) < margin else 1.0
        se = self.sd / math.sqrt(self.n)
        p_low = stats.t.sf((self.mean + margin) / se, self.n - 1)
        p_high = stats.t.cdf((self.mean - margin) / se, self.n - 1)
        return float(max(p_low, p_high))

    def interval(self, digits: int = 1) -> str:
        if not self.defined:
            return f"{self.mean:+.{digits}f} (n={self.n}: no interval)" if self.n else "no paired seeds"
        return f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"


def one_sample(d) -> Paired:
    """Mean, t interval and tests against 0 of per-seed values ``d`` (NaNs dropped)."""
    d = np.asarray(d, dtype=float)
    d = d[~np.isnan(d)]
    n = len(d)
    nan = float("nan")
    mean = float(d.mean()) if n else nan
    if n < 2:
        return Paired(n, mean, nan, nan, nan, nan, nan)
    sd = float(d.std(ddof=1))
    if sd == 0.0:  # every seed gives the same difference: the interval is that point
        p = 1.0 if mean == 0.0 else 0.0
        return Paired(n, mean, 0.0, mean, mean, p, _signflip(d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t = stats.ttest_1samp(d, 0.0)
        ci = t.confidence_interval(LEVEL)
    return Paired(n, mean, sd, float(ci.low), float(ci.high), float(t.pvalue), _signflip(d))


def _signflip(d: np.ndarray) -> float:
    exact = len(d) <= EXACT_UP_TO
    res = stats.permutation_test(
        (d,),
        np.mean,
        permutation_type="samples",
        n_resamples=np.inf if exact else 2**16,
        alternative="two-sided",
        rng=None if exact else np.random.default_rng(0),
    )
    return float(res.pvalue)


def paired(x: dict, y: dict) -> Paired:
    """Arms ``x`` and ``y`` as {seed: value}: the differences x_s - y_s over their common seeds."""
    seeds = sorted(set(x) & set(y))
    return one_sample([x[s] - y[s] for s in seeds])


def smallest_signflip_p(n: int) -> float:
    """The smallest two-sided p the exact sign-flip test can give with n seeds."""
    return min(1.0, 2.0 / 2**n) if n else 1.0


POWER = 0.8  # the chance of deciding that seeds_needed plans for


def seeds_needed(delta: float, sd_d: float, power: float = POWER, level: float = 0.95, n_max: int = 1000) -> int:
    """The smallest n (>= 2) whose paired two-sided t test at ``level`` rejects d = 0 with probability
    ``power`` when the true mean difference is ``delta`` and its per-seed sd is ``sd_d``."""
    if sd_d <= 0:
        return 2
    for n in range(2, n_max + 1):
        crit = stats.t.ppf(0.5 + level / 2, n - 1)
        nc = delta * math.sqrt(n) / sd_d
        if stats.nct.sf(crit, n - 1, nc) + stats.nct.cdf(-crit, n - 1, nc) >= power:
            return n
    return n_max


def tost_power(delta: float, sd_d: float, margin: float, n: int, alpha: float = 0.05) -> float:
    """The probability that the paired TOST at ``alpha`` each side (``Paired.p_equivalent`` < alpha) shows
    |d| < ``margin`` with n seeds when the true mean difference is ``delta`` and its per-seed sd ``sd_d``.

    Exact, without simulation: with the sample sd S, TOST rejects when -margin + c S / sqrt(n) < mean <
    margin - c S / sqrt(n) (c: the t quantile at 1 - alpha, n - 1 df); the mean is normal and independent
    of (n - 1) S^2 / sd^2 ~ chi^2_{n-1}, so the power is one integral over that chi-square of a difference
    of two normal cdfs (Owen 1965's form of the two one-sided tests' power).
    """
    if n < 2 or not margin > 0:
        return 0.0
    if sd_d <= 0:
        return 1.0 if abs(delta) < margin else 0.0
    df, c = n - 1, float(stats.t.ppf(1 - alpha, n - 1))
    se = sd_d / math.sqrt(n)
    v_max = df * (margin / (c * se)) ** 2  # beyond it, c S / sqrt(n) >= margin: no mean can pass

    def inside(v: float) -> float:
        h = c * se * math.sqrt(v / df)  # c S / sqrt(n) at (n - 1) S^2 / sd^2 = v
        return (
            stats.norm.cdf((margin - h - delta) / se) - stats.norm.cdf((-margin + h - delta) / se)
        ) * stats.chi2.pdf(v, df)

    mode = max(df - 2.0, 0.0)
    points = [p for p in (mode, df) if 0 < p < v_max]
    return float(min(1.0, integrate.quad(inside, 0.0, v_max, points=points or None, limit=200, epsabs=1e-10)[0]))


def seeds_for_equivalence(
    delta: float, sd_d: float, margin: float, alpha: float = 0.05, power: float = POWER, n_max: int = 1000
) -> int:
    """The smallest n (>= 2) whose paired TOST at ``alpha`` each side shows |d| < ``margin`` with probability
    ``power`` (:func:`tost_power`) when the true mean difference is ``delta`` and its per-seed sd ``sd_d``;
    ``n_max`` when none up to it does (always so for |delta| >= margin). The power grows with n: bisection."""
    if not abs(delta) < margin or tost_power(delta, sd_d, margin, n_max, alpha) < power:
        return n_max
    lo, hi = 1, n_max  # power(lo) < power <= power(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if tost_power(delta, sd_d, margin, mid, alpha) >= power else (mid, hi)
    return hi
