"""The settings an experiment's runs hold at a value other than the suite's default
(:func:`fixed_settings`): docs/GUIDE.md, "Settings off the default".
"""

from __future__ import annotations

import functools
import json

import pandas as pd

from clsuite.analysis.load import CONDITIONS, flatten, short

GROUPS = ("benchmark", "method", "reading")  # what a run's default is composed with


@functools.cache
def default_of(benchmark: str, method: str, reading: str) -> tuple[dict, tuple[str, ...]]:
    """(flattened default config, groups left at the suite's default) for one (benchmark, method, reading)."""
    from hydra import compose, initialize_config_dir

    from clsuite.config.check import CONF_DIR, group_options
    from clsuite.run.identity import normalize

    chosen = dict(zip(GROUPS, (benchmark, method, reading)))
    known = {g: v for g, v in chosen.items() if v in group_options(g)}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"{g}={v}" for g, v in known.items()])
    return flatten(normalize(cfg)), tuple(g for g in GROUPS if g not in known)


def changed(run: pd.Series) -> dict[str, object]:
    """``{key: value}`` of the settings of one run (a row of ``load_runs``) that differ from its default."""
    default, unknown = default_of(str(run["benchmark"]), str(run["method"]), str(run["reading"]))
    out = {k: run[k] for k in CONDITIONS if k in default and float(run[k]) != float(default[k])}
    for k, v in run["flat"].items():
        if k in default and not k.startswith(tuple(f"{g}." for g in unknown)) and _same(v) != _same(default[k]):
            out[k] = v
    return out


def _same(v) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def fixed_settings(runs: pd.DataFrame) -> list[str]:
    """``["M=50 per class", "batch_size=20", ...]``: the settings every run changed, to the same value."""
    changes = pd.DataFrame([{k: _same(v) for k, v in changed(run).items()} for _, run in runs.iterrows()])
    common = {k: col.iloc[0] for k, col in changes.items() if col.notna().all() and col.nunique() == 1}
    out = []
    for k, v in sorted(common.items(), key=lambda kv: (kv[0] not in CONDITIONS, kv[0])):  # M, τ, λ first
        value = json.loads(v)
        shown = f"{value:g}" if isinstance(value, float) else value
        unit = "" if k != "memory" else (" per class" if runs["memory_per_class"].all() else " in total")
        out.append(f"{short(k)}={shown}{unit}")
    return out


def caption(settings: list[str]) -> str:
    """The sentence a caption or title gets ("" when every run keeps the defaults)."""
    return f"Held for every run at a value other than the default: {', '.join(settings)}." if settings else ""
