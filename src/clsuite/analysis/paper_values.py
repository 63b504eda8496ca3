"""THE PAPER'S NUMBERS, transcribed by hand: not results of this suite.

Source: Li, Tang, Li, "AdaER" (``paper/adaer.tex``): Table II (label ``Table:analysis``) and the
numbers quoted in Sec. V, copied as printed, typos included (:data:`TABLE2_NOTES`); ``None`` = "N/A".
The values are data, each with its line in the paper: :data:`VALUES_FILE`, read and checked on import.
Always shown marked as the paper's (in [brackets] or a column named "paper").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from clsuite.core.metrics import METRICS, QUANTITIES

VALUES_FILE = Path(__file__).with_name("paper_values.yaml")  # the transcription, each value with its line in the paper
_KINDS = ("abs", "gain", "decline")  # a Quote's kind

# Benchmarks on other data than the paper's: the paper benchmark whose Table II values are printed
# beside them, always labelled as values measured on the official data (never compared as equals:
# the claims are judged on these runs separately, clsuite.analysis.report).
OFFICIAL_OF = {"split_cifar10_jpeg": "split_cifar10"}


def under(cond: dict, at: dict | None = None) -> bool:
    """Whether ``cond`` (M, tau, lambda; a key it lacks counts as Table II's) is Table II's conditions
    (with ``at``: Table II's conditions changed by ``at``, a quote's)."""
    ref = {**TABLE2_CONDITIONS, **(at or {})}
    return all(math.isclose(float(cond.get(k, v)), float(ref[k])) for k, v in TABLE2_CONDITIONS.items())


def table2_value(benchmark: str, method: str, metric: str) -> float | None:
    return TABLE2.get(benchmark, {}).get(method, {}).get(metric)


@dataclass(frozen=True)
class Quote:
    """One number the paper states in its text, with what it measures.

    ``quantity``: acc | forget | bwt | fwt | first_task_final (R[T-1, 0]) | first_task_drop
    (R[0, 0] - R[T-1, 0], points). ``at``: the condition (memory / tau / lambda) of the value.
    ``kind``: ``abs`` (the value itself), ``gain`` (100 (x / ref - 1), %), ``decline``
    (100 (1 - x / ref), %), where ref is the same quantity under ``vs`` (keys replacing those of
    the claim, e.g. ``{"method": "er"}`` or ``{"memory": 50}``).
    """

    experiment: str
    where: str
    quote: str
    benchmark: str
    method: str
    quantity: str
    value: float
    at: dict = field(default_factory=dict)
    kind: str = "abs"
    vs: dict | None = None


class PaperValuesError(ValueError):
    """:data:`VALUES_FILE` does not hold what this module expects."""


def load_values(path=VALUES_FILE) -> dict:
    """The transcription in ``path`` (laid out as :data:`VALUES_FILE`), checked, with Table II as
    ``{benchmark: {method: {metric: value}}}`` and the quotes as :class:`Quote`; otherwise
    :class:`PaperValuesError` naming the file and what is wrong."""

    def check(ok: bool, what: str) -> None:
        if not ok:
            raise PaperValuesError(f"{path}: {what}")

    try:
        return _values(yaml.safe_load(Path(path).read_text()), check)
    except (yaml.YAMLError, AttributeError, KeyError, IndexError, TypeError) as e:
        raise PaperValuesError(f"{path}: not laid out as expected ({type(e).__name__}: {e})") from None


def _values(raw, check) -> dict:
    keys = ["targets", "benchmarks", "benchmark_labels", "method_labels", "table2", "quotes", "peers"]
    check(isinstance(raw, dict) and list(raw) == keys, f"expected the keys {keys}")
    t2 = raw["table2"]
    check(list(t2) == ["columns", "metrics", "conditions", "groups", "notes"], "table2: unexpected keys")
    check(t2["metrics"] == list(METRICS), f"table2.metrics: expected {list(METRICS)}")
    check(list(t2["conditions"]) == ["memory", "lambda", "tau"], "table2.conditions: expected memory, lambda, tau")
    cols, rows = t2["columns"], {m: v for group in t2["groups"] for m, v in group.items()}
    for m, vals in rows.items():
        cells = [x for v in vals for x in v]
        ok = [len(v) for v in vals] == [len(METRICS)] * len(cols) and all(x is None or type(x) is float for x in cells)
        check(ok, f"table2 row {m}: expected {len(cols)} lists of {len(METRICS)} numbers or null")
    check(list(raw["method_labels"]) == list(rows), "method_labels: expected Table II's rows, in order")
    check(cols == raw["benchmarks"][: len(cols)], "benchmarks: expected Table II's columns first")
    check(set(raw["benchmarks"]) <= set(raw["benchmark_labels"]), "benchmark_labels: a benchmark lacks one")
    names, quotes = {f.name for f in fields(Quote)} - {"experiment", "where"}, []
    for exp, block in raw["quotes"].items():
        for q in block["items"]:
            kind = q.get("kind", "abs")
            ok = exp in raw["targets"] and set(q) <= names and type(q.get("value")) is float and kind in _KINDS
            ok = ok and q.get("benchmark") in raw["benchmarks"] and q.get("method") in rows
            check(ok and q.get("quantity") in QUANTITIES, f"quotes.{exp}: unexpected quote {q}")
            check((kind == "abs") == (q.get("vs") is None), f"quotes.{exp}: a gain or decline needs vs: {q}")
            quotes.append(Quote(exp, block["where"], **q))
    for b, published in raw["peers"].items():
        for pub in published:
            ok = b in raw["benchmarks"] and isinstance(pub.get("source"), str) and set(pub) - {"source"} <= set(rows)
            check(ok and all(type(pub[m]) is float for m in set(pub) - {"source"}), f"peers.{b}: unexpected {pub}")
    table2 = {b: {m: dict(zip(METRICS, v[i], strict=True)) for m, v in rows.items()} for i, b in enumerate(cols)}
    groups = tuple(tuple(group) for group in t2["groups"])
    return {**raw, "table2": table2, "conditions": t2["conditions"], "notes": tuple(t2["notes"]),
            "columns": tuple(cols), "groups": groups, "quotes": tuple(quotes)}  # fmt: skip


_VALUES = load_values()
# the paper's tables and figures: target -> what it makes, in the paper's order (that of `make paper`; clsuite.paper)
TARGETS: dict[str, str] = _VALUES["targets"]
TABLE2_BENCHMARKS: tuple[str, ...] = _VALUES["columns"]
BENCHMARKS: tuple[str, ...] = tuple(_VALUES["benchmarks"])  # Table II's, then Figs. 8 and 12's
# Paper Table II: benchmark -> method -> metric -> value, M = 100, class-IL, one pass over the stream.
TABLE2: dict[str, dict[str, dict[str, float | None]]] = _VALUES["table2"]
# The conditions of Table II: a cell of ours is compared with the paper's only under these.
TABLE2_CONDITIONS: dict[str, float] = _VALUES["conditions"]
TABLE2_NOTES: tuple[str, ...] = _VALUES["notes"]
# Table II's horizontal rules (auxiliary baselines | regularisation | replay); its row order and names.
METHOD_GROUPS: tuple[tuple[str, ...], ...] = _VALUES["groups"]
METHOD_ORDER: tuple[str, ...] = tuple(m for group in METHOD_GROUPS for m in group)
METHOD_LABELS: dict[str, str] = _VALUES["method_labels"]
BENCHMARK_LABELS: dict[str, str] = _VALUES["benchmark_labels"]
QUOTES: tuple[Quote, ...] = _VALUES["quotes"]
# Other papers' published Acc on a paper benchmark: benchmark -> [{source, method: value}] (not the paper's).
PEERS: dict[str, list[dict]] = _VALUES["peers"]


def method_label(method: str) -> str:
    """The paper's name of a method; a method the paper does not have keeps its own name."""
    return METHOD_LABELS.get(method, str(method))


def bench_label(benchmark: str) -> str:
    return BENCHMARK_LABELS.get(benchmark, str(benchmark))


def order_methods(methods) -> list[str]:
    """Table II's row order; methods the paper does not have follow, alphabetically."""
    methods = list(dict.fromkeys(methods))
    known = [m for m in METHOD_ORDER if m in methods]
    return known + sorted(m for m in methods if m not in known)


def order_benchmarks(benchmarks) -> list[str]:
    order = list(BENCHMARK_LABELS)
    return sorted(set(benchmarks), key=lambda b: (order.index(b) if b in order else len(order), b))
