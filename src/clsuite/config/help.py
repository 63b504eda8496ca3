"""``clsuite --help`` and docs/CONFIG.md, generated from the schema (``clsuite.config.schema``) and conf/.

``python -m clsuite.config.help > docs/CONFIG.md`` rewrites the doc; ``tests/lab/test_schema.py`` fails when
the file differs.
"""

from __future__ import annotations

import functools

import yaml
from omegaconf import OmegaConf

from clsuite.config.check import CONF_DIR, GROUPS, dotted_get, group_options
from clsuite.config.schema import KEYS, MISSING, RULES, SLOTS, locate, node_keys, targets

USAGE = """\
usage: clsuite [run] [KEY=VALUE ...]              one run -> outputs/<experiment>/<time>_<benchmark>_<method>_<id>/
       clsuite sweep KEY=A,B ... [KEY=VALUE ...]  a sweep, every combination (= clsuite -m ...) -> multirun/<experiment>/
       clsuite paper TARGET [--seeds N] [...]     a paper table or figure: its sweep, then its tables (= make TARGET);
                                                  TARGET: table2, memory, first_task, cifar100, imbalance, tau,
                                                  ablation, ablation_cifar100, all, choices, records (help paper)
       clsuite eval RUN [--split test|val]        a finished run's saved model (keep_weights=true) on every task,
                                                  class-IL and task-IL (RUN: its folder; or ckpt_path=<its model.ckpt>)
       clsuite aggregate EXP [...]                tables and figures of multirun/EXP/ -> results/EXP/
       clsuite report [--docs] [--records]        the report from multirun/ or docs/records/ -> results/report/
       clsuite records pack EXP [...] | check     runs -> docs/records/; the committed report against its records
       clsuite replay [--sample N] [--seed S]     rerun some of the records' portable runs here; R compared bit for bit
       clsuite claims [--details]                 the paper's claims judged from multirun/, printed (writes nothing)
       clsuite choices                            the paper's open choices, paired by seed -> results/choices/
       clsuite wandb EXP [...]                    W&B runs and charts of an experiment, from its results files
       clsuite help [VERB]                        this text, or one verb's options
       clsuite --cfg job [KEY=VALUE ...]          print the composed config, run nothing
(python src/run.py in a checkout; python -m clsuite wherever it is installed). Bad input: one `error:` line,
exit 2, before anything is written."""


def group_key(group: str) -> str:
    return f"{group}@method.{group}" if group in ("replay", "update") else group


AUTOMATIC = ("tuned", "reading_family")  # groups composed from the other choices (conf/config.yaml), never chosen


@functools.cache
def _options() -> dict[str, list[tuple[str, dict]]]:
    """Each class of a slot (``schema.targets``) -> (an option that selects it, that option's node), ..."""
    out: dict[str, list] = {}
    for group in ("method", "replay", "update"):
        for option in group_options(group):
            doc = yaml.safe_load((CONF_DIR / group / f"{option}.yaml").read_text()) or {}
            node = (doc.get("plugin") or {}) if group == "method" else doc
            if target := node.get("_target_"):
                out.setdefault(target, []).append((f"{group_key(group)}={option}", node))
    return out


def selected_by() -> dict[str, list[str]]:
    """Each class of a slot -> the options that select it (``method=hal``, ``replay@method.replay=mir``)."""
    return {target: [option for option, _ in found] for target, found in _options().items()}


@functools.cache
def defaults() -> dict:
    """Every key's default in the composed default config, interpolations unresolved."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = OmegaConf.to_container(compose(config_name="config"), resolve=False)
    return {k: v for k in KEYS if (v := dotted_get(cfg, k, MISSING)) is not MISSING}


def _show(v) -> str:
    if v is MISSING:
        return "-"
    if v == "???":
        return "(reading)"
    return yaml.safe_dump(v, default_flow_style=True, width=1000).strip().removesuffix("...").strip()


def rows() -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """[(section title, [(key, default, range, meaning), ...]), ...] for every declared key."""
    sections: dict[str, list] = {}
    for key, spec in KEYS.items():
        head = key.split(".")[0] if "." in key else "run"
        sections.setdefault(head, []).append((key, _show(defaults().get(key, MISSING)), spec.range(), spec.doc))
    out = [(f"{head} keys", r) for head, r in sections.items()]
    for slot in SLOTS:
        for target in targets(slot):
            cls, keys = locate(target, "_target_"), node_keys(target)
            by = ", ".join(selected_by().get(target, [])) or "(no option selects it)"
            extra = []
            if layout := getattr(cls, "layout", None):
                extra.append(f"memory >= one slot per {layout}")
            if scenarios := getattr(cls, "scenarios", None):
                extra.append(f"scenario: {', '.join(scenarios)}")
            title = f"method.{slot} = {target.rsplit('.', 1)[-1]} ({by})" + (f"; {'; '.join(extra)}" if extra else "")
            node = _options().get(target, [("", {})])[0][1]  # (the first option's yaml: the defaults shown)
            body = [(f"method.{slot}.{k}", _show(node.get(k, MISSING)), s.range(), s.doc) for k, s in keys.items()]
            out.append((title, body))
    return out


def groups() -> list[tuple[str, str, str]]:
    """[(KEY, options, default), ...] for the config groups."""
    base = (yaml.safe_load((CONF_DIR / "config.yaml").read_text()) or {}).get("defaults", [])
    chosen = {k: v for d in base if isinstance(d, dict) for k, v in d.items()}
    return [
        (group_key(g), ", ".join(group_options(g)), str(chosen.get(g, "per method") or "none"))
        for g in GROUPS
        if g not in AUTOMATIC
    ]


def help_text() -> str:
    lines = [USAGE, "", "Config groups (KEY=OPTION):"]
    for key, options, default in groups():
        lines.append(f"  {key:22s} {options}  [default: {default}]")
    lines.append(
        "  (tuned: per-benchmark values of a method, conf/tuned/<method>/<benchmark>.yaml, applied automatically)"
    )
    lines.append(
        "  (reading_family: per-family values of a reading, conf/reading_family/<reading>_<family>.yaml, applied"
        " automatically)"
    )
    lines.append(
        "  (debug=smoke: a run in seconds, the synthetic stream, a few batches, no logger, no checkpoint:"
        " conf/debug/smoke.yaml)"
    )
    for title, keys in rows():
        lines += ["", f"{title}:"]
        if not keys:
            lines.append("  (no parameters)")
        for key, default, rng, doc in keys:
            d = f" [default: {default}]" if default not in ("", "-") else ""
            lines.append(f"  {key}: {rng}{d}")
            lines.append(f"      {doc}")
    lines += ["", "Full reference: docs/CONFIG.md. Hydra's own flags: --hydra-help."]
    return "\n".join(lines)


def markdown() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from `src/clsuite/config/schema.py` by `python -m clsuite.config.help > docs/CONFIG.md`",
        "(`tests/lab/test_schema.py` fails when this file is out of date). `clsuite --help` prints the same.",
        "Every key is checked before a run (and before any job of a sweep) against the range below and",
        "the cross-key rules at the end; a bad value is one `error:` line and exit status 2.",
        "",
        "```",
        USAGE,
        "```",
        "",
        "## Config groups",
        "",
        "| KEY | options | default |",
        "|---|---|---|",
    ]
    lines += [f"| `{k}` | {o} | {d} |" for k, o, d in groups()]
    for title, keys in rows():
        lines += ["", f"## {title}", ""]
        if not keys:
            lines.append("No parameters.")
            continue
        lines += ["| key | default | range | meaning |", "|---|---|---|---|"]
        lines += [f"| `{k}` | {_cell(d)} | {_cell(r)} | {_cell(m)} |" for k, d, r, m in keys]
    lines += ["", "## Cross-key rules", ""]
    lines += [f"- {' '.join((r.__doc__ or '').split())}" for r in RULES]
    lines += [
        "",
        "## Adding a key",
        "",
        "A key of `conf/config.yaml` or of a group: one line in `KEYS` of `src/clsuite/config/schema.py`",
        '(`"data.foo": Flag("what it does")`). A parameter of a replay policy, update policy or method',
        "plugin: its constructor's annotation, the one declaration of that key",
        '(`foo: Annotated[int, Whole(1, None, "what it does")] = 1`, `clsuite.core.spec`). Then',
        "`python -m clsuite.config.help > docs/CONFIG.md`. A key of `conf/` without a declaration fails",
        "`tests/lab/test_schema.py`.",
        "",
    ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or " "


if __name__ == "__main__":
    print(markdown(), end="")
