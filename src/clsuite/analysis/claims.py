"""The paper's claims, each checked with paired statistics over seeds, and its quoted numbers beside ours.

A claim (Sec. V of the paper; :data:`CLAIMS`) becomes a list of comparisons. Each comparison is
a per-seed difference ``d_s`` between two arms that differ in one thing (the method, M, tau or
lambda) and share the seed, hence the data split, class order and initialisation; ``d`` is
oriented so that ``d > 0`` means the claim holds (for Forget and the first-task drop, lower is
better, so ``d = other - claimed``). ``clsuite.analysis.stats.paired`` gives the 95% t interval
of mean(d), the paired t-test and the exact sign-flip test.

Rules (the same for every claim; :func:`outcome` and :func:`verdict` are their only code):

1. A comparison is **supported** when its 95% interval lies above 0, **contradicted** when it
   lies below 0, **unresolved** when it contains 0 (the seeds cannot separate the two arms),
   **identical** when the two arms agree to the last digit in every seed (FWT in class-IL: it
   depends on the initialisation only), and **missing** when fewer than 2 seeds have both arms.
2. A claim is **reproduced** when every comparison is supported; **not reproduced** when at least
   one is contradicted (each claim of the paper is a conjunction, "best of all", "at every M",
   "beats MIR's and ER's": one comparison that goes the other way falsifies it, however many
   others are supported); **partly reproduced** when some are supported and none contradicted
   (the rest unresolved, identical or missing); **inconclusive** when none is supported or
   contradicted; **not run** when the claim has no comparison with runs.
3. Each claim is judged separately per reading (``paper_text``, ``mir_code``, ...), on the runs
   of its experiment on the paper's benchmarks (split-MNIST, -FMNIST, -CIFAR10, -CIFAR100) under the
   paper's conditions (M = 100, tau = 0.5, lambda = 0 unless the
   claim varies them), never pooling variants.
4. No correction for multiple comparisons: a claim with many comparisons is judged on all of them
   (one unresolved comparison stops "reproduced"), and each interval is shown. Differences are in
   the quantity's own unit (Acc in %, others in % points); the imbalance claim uses the paper's
   relative decline 100 (1 - Acc(lambda=0.9) / Acc(lambda=0.1)) per seed.

The paper's numbers quoted in its text (``paper_values.QUOTES``) are set beside ours with a 95%
t interval over seeds (relative numbers computed per seed) and whether the interval contains the
paper's value: a magnitude check, not a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from clsuite.analysis import paper_values as pv
from clsuite.analysis.load import CONDITIONS, order_readings, select
from clsuite.analysis.stats import Paired, one_sample, paired, smallest_signflip_p
from clsuite.metrics import QUANTITIES

SUPPORTED, CONTRADICTED, UNRESOLVED, IDENTICAL, MISSING = (
    "supported",
    "contradicted",
    "unresolved",
    "identical",
    "missing",
)
REPRODUCED, PARTLY, NOT, INCONCLUSIVE, NOT_RUN = (
    "reproduced",
    "partly reproduced",
    "not reproduced",
    "inconclusive",
    "not run",
)


def outcome(p: Paired) -> str:
    """Rule 1."""
    if not p.defined:
        return MISSING
    if p.low == p.high == 0.0:
        return IDENTICAL
    if p.low > 0:
        return SUPPORTED
    if p.high < 0:
        return CONTRADICTED
    return UNRESOLVED


def verdict(outcomes: list[str]) -> str:
    """Rule 2: the verdict of a claim from the outcomes of its comparisons."""
    if not outcomes or all(o == MISSING for o in outcomes):
        return NOT_RUN
    n_sup, n_con = outcomes.count(SUPPORTED), outcomes.count(CONTRADICTED)
    if n_sup == len(outcomes):
        return REPRODUCED
    if n_con:
        return NOT
    return PARTLY if n_sup else INCONCLUSIVE


@dataclass(frozen=True)
class Comparison:
    benchmark: str
    label: str  # "AdaER vs MIR, Acc (M=100)"
    result: Paired

    @property
    def outcome(self) -> str:
        return outcome(self.result)


@dataclass
class Judged:
    """One claim judged on one reading's runs."""

    claim: Claim
    reading: str
    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return verdict([c.outcome for c in self.comparisons])

    def count(self, o: str) -> int:
        return sum(c.outcome == o for c in self.comparisons)

    @property
    def deciding(self) -> Comparison | None:
        """The comparison that decides the verdict: when one is contradicted, the most clearly
        contradicted (lowest upper bound); otherwise the weakest (lowest lower bound)."""
        defined = [c for c in self.comparisons if c.result.defined]
        against = [c for c in defined if c.outcome == CONTRADICTED]
        if against:
            return min(against, key=lambda c: c.result.high)
        return min(defined, key=lambda c: c.result.low) if defined else None


# ----------------------------------------------------------------------------- arms and comparisons


def arm(runs: pd.DataFrame, quantity: str, **where) -> dict:
    """{seed: value} of ``quantity`` over the runs matching ``where`` (one run per seed after dedupe)."""
    s = select(runs, **where)
    s = s[~s[quantity].isna()]
    return s.groupby("seed")[quantity].mean().to_dict()


def _benchmarks(runs: pd.DataFrame):
    """(benchmark, its runs, the methods present) in the paper's order."""
    for b in pv.order_benchmarks(runs["benchmark"]):
        rb = runs[runs["benchmark"] == b]
        yield b, rb, pv.order_methods(rb["method"])


def _better(benchmark: str, label: str, quantity: str, x: dict, y: dict) -> Comparison:
    """Arm x better than arm y: d = x - y, or y - x where lower is better (Forget, the first-task drop)."""
    if not QUANTITIES[quantity].higher_is_better:
        x, y = y, x
    return Comparison(benchmark, f"{label}, {QUANTITIES[quantity].label}", paired(x, y))


def _cond(key: str, v) -> str:
    return {"memory": f"M={v:g}", "tau": f"τ={v:g}", "lambda": f"λ={v:g}"}[key]


def _values(runs, key):
    return sorted(runs[key].dropna().unique().tolist())


Builder = Callable[[pd.DataFrame], list[Comparison]]


def beats(quantity: str, winners, losers=None, over: str | None = None, exclude=("joint",)) -> Builder:
    """Each winner beats each loser (default: every other method present) on every benchmark (and value of ``over``)."""

    def build(runs):
        out = []
        for b, rb, present in _benchmarks(runs):
            for v in _values(rb, over) if over else [None]:
                at = {over: v} if over else {}
                for w in [m for m in winners if m in present]:
                    for lo in [m for m in (losers or present) if m in present and m != w and m not in exclude]:
                        label = f"{pv.method_label(w)} vs {pv.method_label(lo)}" + (
                            f" ({_cond(over, v)})" if over else ""
                        )
                        out.append(
                            _better(
                                b,
                                label,
                                quantity,
                                arm(rb, quantity, method=w, **at),
                                arm(rb, quantity, method=lo, **at),
                            )
                        )
        return out

    return build


def best_at(quantity: str, key: str, best: float, method: str) -> Builder:
    """``method`` is best at ``key = best`` against every other value of ``key`` on every benchmark."""

    def build(runs):
        out = []
        for b, rb, _ in _benchmarks(select(runs, method=method)):
            top = arm(rb, quantity, **{key: best})
            for v in [v for v in _values(rb, key) if not math.isclose(v, best)]:
                label = f"{pv.method_label(method)} {_cond(key, best)} vs {_cond(key, v)}"
                out.append(_better(b, label, quantity, top, arm(rb, quantity, **{key: v})))
        return out

    return build


def grows(quantity: str, key: str, lo: float, hi: float, exclude=("joint", "online")) -> Builder:
    """Every method improves from ``key = lo`` to ``key = hi``."""

    def build(runs):
        out = []
        for b, rb, present in _benchmarks(runs):
            for m in [m for m in present if m not in exclude]:
                x, y = arm(rb, quantity, method=m, **{key: hi}), arm(rb, quantity, method=m, **{key: lo})
                out.append(_better(b, f"{pv.method_label(m)} {_cond(key, hi)} vs {_cond(key, lo)}", quantity, x, y))
        return out

    return build


def changes_less(quantity: str, key: str, lo: float, hi: float, method: str, others=None, relative=False) -> Builder:
    """``method`` changes less than each other method from ``key = lo`` to ``key = hi``.

    Change per seed: abs(q(hi) - q(lo)) (points), or with ``relative`` the decline 100 (1 - q(hi) / q(lo)).
    """

    def change(rb, m) -> dict:
        a, z = arm(rb, quantity, method=m, **{key: lo}), arm(rb, quantity, method=m, **{key: hi})
        if relative:
            return {s: 100 * (1 - z[s] / a[s]) for s in set(a) & set(z) if a[s]}
        return {s: abs(z[s] - a[s]) for s in set(a) & set(z)}

    def build(runs):
        out = []
        for b, rb, present in _benchmarks(runs):
            if method not in present:
                continue
            mine = change(rb, method)
            for o in [m for m in (others or present) if m in present and m not in (method, "joint", "online")]:
                what = "decline (%)" if relative else "abs. change"
                label = f"{pv.method_label(o)} vs {pv.method_label(method)}: {what} of {QUANTITIES[quantity].label}, {_cond(key, lo)} → {_cond(key, hi)}"
                out.append(Comparison(b, label, paired(change(rb, o), mine)))
        return out

    return build


# ----------------------------------------------------------------------------- the claims


@dataclass(frozen=True)
class Claim:
    key: str
    experiment: str
    source: str
    text: str
    build: Builder
    at: dict = field(default_factory=dict)  # fixed conditions of the runs it reads


_T2 = pv.TABLE2_CONDITIONS
_FIXED = {"memory": _T2["memory"], "tau": _T2["tau"], "lambda": _T2["lambda"]}
_NO_TAU = {"memory": _T2["memory"], "lambda": _T2["lambda"]}
_LAM = {"lambda": _T2["lambda"]}

CLAIMS: tuple[Claim, ...] = tuple(
    [
        Claim(
            f"table2_{k}",
            "table2",
            "Sec. V-B, Table II",
            f"AdaER has the best {QUANTITIES[k].label} of all methods (Joint excluded), M = 100",
            beats(k, ["adaer"]),
            _FIXED,
        )
        for k in ("acc", "forget", "bwt", "fwt")
    ]
    + [
        Claim("memory_grows", "memory", "Sec. V-B, Fig. 5", "Every method's Acc rises from M = 50 to M = 200",
              grows("acc", "memory", 50, 200), _LAM),
        Claim("memory_best", "memory", "Sec. V-B, Fig. 5", "AdaER has the best Acc at every M",
              beats("acc", ["adaer"], over="memory"), _LAM),
        Claim("memory_robust", "memory", "Sec. V-B, Fig. 5",
              "AdaER's Acc changes least with M, M = 50 → 200 (GEM +49.9%, AdaER +2.5% on split-MNIST)",
              changes_less("acc", "memory", 50, 200, "adaer"), _LAM),
        Claim("memory_bwt", "memory", "Sec. V-B, Fig. 6", "AdaER has the best BWT at every M",
              beats("bwt", ["adaer"], over="memory"), _LAM),
        Claim("first_task", "first_task", "Sec. V-B, Fig. 7",
              "AdaER loses the least accuracy on task 1 (after task 1 minus after the last task) of all methods",
              beats("first_task_drop", ["adaer"]), _NO_TAU),
        Claim("cifar100", "cifar100", "Sec. V-B, Fig. 8", "AdaER's Acc beats ER's, GSS's and MIR's on split-CIFAR100",
              beats("acc", ["adaer"], ["er", "gss", "mir"]), _NO_TAU),
        Claim("imbalance_05", "imbalance", "Sec. V-B, Fig. 9a", "At λ = 0.5 AdaER's Acc beats MIR's and ER's",
              beats("acc", ["adaer"], ["mir", "er"], over="lambda"), {"memory": _T2["memory"], "lambda": 0.5}),
        Claim("imbalance_robust", "imbalance", "Sec. V-B, Fig. 9b",
              "AdaER's Acc declines less than MIR's and ER's from λ = 0.1 to 0.9 (split-FMNIST: 6.2% vs 9.0%, 9.6%)",
              changes_less("acc", "lambda", 0.1, 0.9, "adaer", ["mir", "er"], relative=True), {"memory": _T2["memory"]}),
        Claim("tau_acc", "tau", "Sec. V-B, Fig. 10a", "τ = 0.5 gives AdaER's best Acc",
              best_at("acc", "tau", 0.5, "adaer"), {"memory": _T2["memory"], "lambda": _T2["lambda"]}),
        Claim("tau_first_task", "tau", "Sec. V-B, Fig. 10b-c", "τ = 0.5 gives AdaER's best final first-task Acc",
              best_at("first_task_final", "tau", 0.5, "adaer"), {"memory": _T2["memory"], "lambda": _T2["lambda"]}),
        Claim("ablation", "ablation", "Sec. V-C, Fig. 11", "C-CMR and E-BRS each beat MIR and ER at every M",
              beats("acc", ["ccmr", "ebrs"], ["mir", "er"], over="memory"), _LAM),
        Claim("ablation_cifar100", "ablation_cifar100", "Sec. V-C, Fig. 12",
              "C-CMR and E-BRS each beat MIR and ER on split-CIFAR100", beats("acc", ["ccmr", "ebrs"], ["mir", "er"]),
              _NO_TAU),
    ]
)  # fmt: skip


def judge(claim: Claim, runs: pd.DataFrame) -> list[Judged]:
    """The claim judged on each reading's runs (rule 3)."""
    base = runs[(runs["variant"] == "") & runs["benchmark"].isin(pv.BENCHMARKS)] if not runs.empty else runs
    out = []
    for r in order_readings(base["reading"]):
        sel = select(base[base["reading"] == r], **claim.at)
        out.append(Judged(claim, r, claim.build(sel) if not sel.empty else []))
    return out


def judge_all(experiments: dict) -> list[Judged]:
    """Every claim whose experiment has runs; claims without runs come back as ``not run``."""
    out = []
    for c in CLAIMS:
        exp = experiments.get(c.experiment)
        judged = judge(c, exp.runs) if exp is not None and not exp.empty else []
        out += judged or [Judged(c, "–")]
    return out


# ----------------------------------------------------------------------------- quoted numbers


@dataclass(frozen=True)
class QuoteCheck:
    quote: pv.Quote
    reading: str
    ours: Paired  # mean and 95% t interval over seeds of the quoted quantity
    how: str

    @property
    def inside(self) -> str:
        if not self.ours.defined:
            return "–"
        return "yes" if self.ours.low <= self.quote.value <= self.ours.high else "no"


def check_quote(q: pv.Quote, runs: pd.DataFrame, reading: str) -> QuoteCheck:
    """Our value of a quoted number, per seed then over seeds (relative ones: per seed)."""
    base = runs[(runs["variant"] == "") & (runs["reading"] == reading) & (runs["benchmark"] == q.benchmark)]

    def at(over: dict) -> dict:
        cond = {**_FIXED, **q.at, **over}
        where = {k: cond[k] for k in CONDITIONS}
        return arm(base, q.quantity, method=cond.get("method", q.method), **where)

    x = at({})
    desc = f"{q.quantity} of {pv.method_label(q.method)}" + "".join(f", {k}={v}" for k, v in q.at.items())
    if q.kind == "abs":
        return QuoteCheck(q, reading, one_sample(list(x.values())), desc)
    ref = at(q.vs or {})
    seeds = sorted(set(x) & set(ref))
    vals = [100 * (x[s] / ref[s] - 1) if q.kind == "gain" else 100 * (1 - x[s] / ref[s]) for s in seeds if ref[s]]
    vs = ", ".join(f"{k}={pv.method_label(v) if k == 'method' else v}" for k, v in (q.vs or {}).items())
    return QuoteCheck(q, reading, one_sample(vals), f"{q.kind} of {desc} vs {vs}, per seed")


def check_quotes(experiments: dict) -> list[QuoteCheck]:
    out = []
    for q in pv.QUOTES:
        exp = experiments.get(q.experiment)
        if exp is None or exp.empty or q.benchmark not in set(exp.runs["benchmark"]):
            continue
        out += [check_quote(q, exp.runs, r) for r in order_readings(exp.runs["reading"])]
    return [c for c in out if c.ours.n]


def sign_flip_floor_note(judged: list[Judged]) -> str:
    """Say so when the seeds are too few for the sign-flip test to ever reach p < 0.05."""
    ns = [c.result.n for j in judged for c in j.comparisons if c.result.n]
    if not ns or smallest_signflip_p(min(ns)) < 0.05:
        return ""
    n = min(ns)
    return (
        f"With {n} seeds the exact sign-flip test cannot give p < 0.05 (its smallest two-sided p is "
        f"2/2^{n} = {smallest_signflip_p(n):.4f}); the verdicts rest on the t intervals, which assume roughly "
        f"normal per-seed differences. 10 seeds bring the floor to {smallest_signflip_p(10):.3f}."
    )
