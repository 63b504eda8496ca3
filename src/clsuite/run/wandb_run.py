"""Weights & Biases, one run: its name and group, what it logs live or from a sealed results file, and
the one W&B run that mirrors a folder's results (docs/GUIDE.md, "Weights & Biases").
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path

import numpy as np

from clsuite.config.check import dotted_get, wandb_settings
from clsuite.config.home import child_env
from clsuite.config.schema import LOGGER_KINDS, logger_kind
from clsuite.core.metrics import METRICS
from clsuite.run.io import METRICS_CSV, RESULTS_FILE, Unreadable, read_object, read_regular, sha256, write_json_atomic
from clsuite.run.results import IGNORED_KEYS, read_run

MIRROR_FILE = "mirror.json"  # <folder>/wandb/: the W&B run that mirrors the folder's results file
TASK_AXIS = "task"  # row i of R
STEP_AXIS = "train/step"  # incoming batches trained on so far (learner.train_steps)

# Override keys that do not tell conditions apart: those a run's identity leaves out (where and how it
# is logged, launched, resumed, on which device), less the thread count, which moves results.
_NOT_A_CONDITION = ("hydra", *(k for k in IGNORED_KEYS if k != "trainer.threads"))
_NAMED = ("benchmark", "method", "memory", "memory_per_class", "reading", "tau", "lambda", "lr", "seed")


# ----------------------------------------------------------------------------- naming


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def swept_keys(overrides) -> dict[str, str]:
    """``{key: value}`` of the overrides that set a condition (not logging, launching, devices)."""
    out = {}
    for o in overrides or ():
        key, sep, value = str(o).partition("=")
        key = key.lstrip("+~")
        if sep and key != "trainer" and not any(key == k or key.startswith(k + ".") for k in _NOT_A_CONDITION):
            out[key] = value
    return out


def describe(cfg: dict, overrides=()) -> dict:
    """W&B name, group, job_type and tags of a run of ``cfg`` (a resolved config as a dict), every key
    ``overrides`` set (:func:`swept_keys`) included (docs/GUIDE.md, "Weights & Biases")."""
    method = cfg.get("method") or {}
    known = "replay" in method or "update" in method  # a results file written without them: name every key
    has_memory = not known or bool(method.get("replay") or method.get("update"))  # Online, Joint, oEWC, SI: none
    parts = [
        ("benchmark", dotted_get(cfg, "benchmark.name")),
        ("method", dotted_get(cfg, "method.name")),
        ("M", f"{cfg.get('memory')}{'/class' if cfg.get('memory_per_class') else ''}" if has_memory else None),
        ("reading", cfg.get("reading")),
        ("tau", cfg.get("tau") if not known or _reads(method, "tau") else None),  # C-CMR's: not ER's, MIR's, ...
        ("lambda", cfg.get("lambda") or None),  # the stream's imbalance: named when there is one
        ("lr", cfg.get("lr")),
    ]
    named = {"benchmark.name", "method.name", *_NAMED}
    parts += [(k, v) for k, v in sorted(swept_keys(overrides).items()) if k not in named]
    parts = [(k, _fmt(v)) for k, v in parts if v is not None]
    seed = ("seed", _fmt(cfg.get("seed")))
    exp = str(cfg.get("experiment", "default"))
    label = lambda kv: kv[1] if kv[0] in ("benchmark", "method") else f"{kv[0]}={kv[1]}"  # noqa: E731
    return {
        "parts": dict(parts),
        "name": _short(" ".join(label(kv) for kv in [*parts, seed])),
        "group": _short(" ".join([exp, *(label(kv) for kv in parts)])),
        "job_type": str(dotted_get(cfg, "method.name")),
        "tags": [exp, *(label(kv)[:64] for kv in [*parts, seed])],
    }


def run_args(cfg: dict, overrides=(), lc=None, *, source: str = "ran") -> dict:
    """wandb.init's name, group, tags, job_type, config (``cfg`` with ``source``), project, entity and mode
    for a run of ``cfg``: what the logger node ``lc`` leaves null is :func:`describe`'s, a value it gives
    wins (its tags are added); a run made from a results file is tagged ``from_results`` and ``source``."""
    lc, d = lc or {}, describe(cfg, overrides)
    # a file logger's name is its folder, and an old node's (a results file's) ``name: wandb`` its selector
    own = lc.get("name") if logger_kind(lc) in ("wandb", "none") and lc.get("name") not in LOGGER_KINDS else None
    tags = [*d["tags"], *(lc.get("tags") or [])] + ([] if source == "ran" else ["from_results", source])
    return {
        **wandb_settings(lc),
        "name": own or d["name"],
        "group": lc.get("group") or d["group"],
        "job_type": d["job_type"],
        "tags": list(dict.fromkeys(tags)),
        "config": {**cfg, "source": source},
    }


def run_id(out_dir, experiment, key: str) -> str:
    """The W&B id of a trained run: a hash of its experiment, its identity key and the W&B run that mirrors
    the folder's sealed results, if any (``wandb/mirror.json``). A rerun of a stopped run has the same id
    and continues its W&B run (conf/logger/wandb.yaml: ``resume: allow``); a rerun after the results were
    sealed and mirrored gets another, and its run supersedes the mirror's."""
    sealed_run = (read_object(Path(out_dir) / "wandb" / MIRROR_FILE) or {}).get("run_id") or ""
    return sha256(f"{experiment}\n{key}\n{sealed_run}")[:16]


def _reads(node, key: str) -> bool:
    """Whether the method's resolved config (its replay, update and plugin) has ``key`` anywhere."""
    if isinstance(node, dict):
        return key in node or any(_reads(v, key) for v in node.values())
    return isinstance(node, list) and any(_reads(v, key) for v in node)


def _short(text: str, limit: int = 128) -> str:
    """W&B caps names and groups at 128 characters: a longer one keeps its start and a hash of the whole."""
    return text if len(text) <= limit else f"{text[: limit - 10]} ~{sha256(text)[:8]}"


# ----------------------------------------------------------------------------- one mirror per folder


def sealed(out_dir) -> tuple[dict | None, str | None]:
    """The folder's sealed results (``clsuite.run.results.read_run``; None when missing or rejected) and
    their seal, the sha256 of their content (what ``wandb/mirror.json`` records)."""
    run = read_run(Path(out_dir) / RESULTS_FILE)
    return (run.data, run.data["digest"]) if run.ok else (None, None)


def mirrored(out_dir, content_sha: str | None, mode: str) -> bool:
    """Whether the folder's W&B run (``wandb/mirror.json``, its folder not superseded) already mirrors this
    content, in this mode."""
    m = read_object(Path(out_dir) / "wandb" / MIRROR_FILE) or {}
    same = content_sha is not None and m.get("sha256") == content_sha and m.get("mode") == mode
    return same and any(p.is_dir() for p in (Path(out_dir) / "wandb").glob(f"*run-*-{m.get('run_id')}"))


def open_run(out_dir, settings: dict, **init):
    """A W&B run in ``<out_dir>/wandb/`` (``settings``: project, entity, mode, ...) on the suite's axes:
    per-task keys on ``task``, training keys on ``train/step`` (:func:`axes`). The folder's earlier runs of
    another id move to ``wandb/superseded/`` first (kept, but not synced by ``wandb sync
    <job>/wandb/offline-run-*``): a folder's runs mirror its current results only; those of this id (a
    stopped process of this run) stay, and ``wandb sync`` uploads them in order, as one run."""
    import wandb

    os.environ.setdefault("WANDB_SILENT", "true")
    d, own = Path(out_dir) / "wandb", {**settings, **init}.get("id")
    for p in [p for p in d.glob("*run-*") if p.is_dir() and not p.is_symlink()]:  # (none without d)
        if own is None or p.name.rsplit("-", 1)[-1] != own:
            (d / "superseded").mkdir(exist_ok=True)
            os.replace(p, d / "superseded" / p.name)
    return axes(wandb.init(**{**settings, "dir": str(out_dir), "reinit": "create_new", **init}))


def axes(run):
    """``run`` with per-task keys on the task axis, training keys on ``train/step`` (never Lightning's
    ``trainer/global_step``: a task's rows and the loss of a resumed run stay where the run put them)."""
    run.define_metric(TASK_AXIS)
    run.define_metric("acc/*", step_metric=TASK_AXIS)
    run.define_metric(STEP_AXIS)
    run.define_metric("train/*", step_metric=STEP_AXIS)
    return run


@contextlib.contextmanager
def finishing(run, out_dir, content_sha: str | None, mode: str, exit_code: int | None = None):
    """Finish ``run`` after the block; when the block went through and ``content_sha`` is known, the
    run is the folder's mirror of that content."""
    try:
        yield run
    finally:
        run.finish(exit_code=exit_code)
    if content_sha is not None:
        write_json_atomic(
            Path(out_dir) / "wandb" / MIRROR_FILE, {"run_id": run.id, "sha256": content_sha, "mode": mode}
        )


# ----------------------------------------------------------------------------- one run


def row_metrics(i: int, accs, seen: int) -> dict:
    """The keys of row i of R, tasks numbered 1..T as in the figures: ``task`` = i + 1,
    ``acc/task<j+1>`` = R[i, j] for the ``seen`` tasks trained so far (the others absent), and
    ``acc/seen`` = their mean."""
    accs = [float(a) for a in accs][:seen]
    return {TASK_AXIS: i + 1, **{f"acc/task{j + 1}": a for j, a in enumerate(accs)}, "acc/seen": float(np.mean(accs))}


def task_rows(R) -> list[dict]:
    """:func:`row_metrics` of every row of R (square: task i + 1 trained; Joint's one row: all tasks)."""
    square = bool(R) and len(R) == len(R[0])
    return [row_metrics(i, row, seen=i + 1 if square else len(row)) for i, row in enumerate(R)]


def log_results(run, res: dict) -> None:
    """What a run logs at its end, from its results file: identity, b, final metrics, R table."""
    R, b = res.get("R") or [], res.get("b") or []
    meta = {
        k: res[k] for k in ("identity", "reading", "versions", "device", "memory_capacity", "reused_from") if k in res
    }
    run.config.update(meta, allow_val_change=True)
    m = res.get("metrics", {})
    run.summary.update({f"final/{k}": m.get(k) for k in METRICS})
    run.summary.update({f"b/task{j + 1}": v for j, v in enumerate(b)})
    run.summary.update({k: res[k] for k in ("wall_time_s", "train_time_s") if k in res})
    if R:
        import wandb

        cols = ["row", *(f"task{j + 1}" for j in range(len(R[0])))]
        rows = [[f"after task {i + 1}", *r] for i, r in enumerate(R)]
        rows = ([["b (init)", *b]] if len(b) == len(R[0]) else []) + rows
        run.log({"accuracy_matrix": wandb.Table(columns=cols, data=rows)})


def csv_history(out_dir, res: dict) -> list[dict]:
    """The loss rows (``train/step``, ``train/loss``, its parts) the run logged to ``csv/metrics.csv``,
    when that file's per-task rows are these results' rows of R and its steps within the run's."""
    import csv

    try:
        text = read_regular(Path(out_dir) / METRICS_CSV).decode()
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except (OSError, Unreadable, csv.Error, UnicodeDecodeError):
        return []
    total = sum(res.get("steps_per_task") or [])
    want = [h["acc/seen"] for h in task_rows(res.get("R") or [])]
    try:
        seen = [float(r["acc/seen"]) for r in rows if r.get("acc/seen")]
        loss = [
            {k: (int(float(v)) if k == STEP_AXIS else float(v)) for k, v in r.items() if k.startswith("train/") and v}
            for r in rows
            if r.get("train/loss")
        ]
    except (TypeError, ValueError):
        return []
    same = len(seen) == len(want) and np.allclose(seen, want, rtol=0, atol=1e-6)
    if not same or any(h.get(STEP_AXIS, total + 1) > total for h in loss):
        return []
    return loss


def log_from_results(cfg: dict, out_dir, *, source: str, overrides=(), logger_cfg=None) -> bool:
    """A W&B run for a job that did not train (step 2), unless the results file is missing or already
    mirrored. Returns whether it logged."""
    res, sha = sealed(out_dir)
    lc = dict(logger_cfg if logger_cfg is not None else (cfg.get("logger") or {}))
    init = run_args(cfg, overrides, lc, source=source)
    if res is None or mirrored(out_dir, sha, init["mode"]):
        return False  # no sealed results file (clsuite.run.results): nothing to mirror
    with finishing(open_run(out_dir, init), out_dir, sha, init["mode"]) as run:
        for h in [*csv_history(out_dir, res), *task_rows(res.get("R") or [])]:  # train/step rows, then task rows
            run.log(h)
        log_results(run, res)
    return True


def mirror_finished(cfg, out_dir, how: str, overrides=()) -> None:
    """A sweep job that did not train (``how``: skipped | reused): its W&B run, under logger=wandb (W&B
    not disabled); a W&B failure (no network in online mode, ...) is a warning: the job's results stand."""
    if logger_kind(cfg.logger) != "wandb" or wandb_settings(cfg.logger)["mode"] == "disabled":
        return
    from omegaconf import OmegaConf

    try:
        log_from_results(OmegaConf.to_container(cfg, resolve=True), out_dir, source=how, overrides=overrides)
    except Exception as e:
        print(f"warning: {Path(out_dir).name}: no W&B run from its results ({type(e).__name__}: {e})", file=sys.stderr)


def log_sweep_aggregate(config) -> None:
    """The end of a sweep under logger=wandb (W&B not disabled): ``clsuite wandb <its folder>`` in a
    child process (the experiment's aggregate run, and a run for any job without one:
    ``clsuite.analysis.wandb_sync``, whose analysis sits above the sweep). A failure is a warning: the sweep's
    results stand."""
    if logger_kind(config.logger) != "wandb" or (settings := wandb_settings(config.logger))["mode"] == "disabled":
        return
    import subprocess

    sweep = Path(str(config.hydra.sweep.dir))
    cmd = [sys.executable, "-m", "clsuite", "wandb", sweep.name, "--multirun-dir", str(sweep.parent)]
    cmd += [f"--{k}={v}" for k, v in settings.items() if v]  # project, entity, mode as the sweep's
    p = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, check=False)  # this very clsuite
    print(p.stdout + p.stderr, end="", file=sys.stderr)
    if p.returncode != 0:
        print(f"warning: no W&B aggregate run for {sweep.name} (clsuite wandb exited {p.returncode})", file=sys.stderr)
