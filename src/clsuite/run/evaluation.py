"""``clsuite eval RUN``: a finished run's saved model (``keep_weights=true``) evaluated again, every task,
class-IL and task-IL (docs/GUIDE.md, "Evaluating a saved model").
"""

from __future__ import annotations

import argparse
import stat
import sys
from pathlib import Path

from omegaconf import OmegaConf

from clsuite.core.data.files import DataError
from clsuite.core.errors import ConfigError, fail

CKPT_PATH = "ckpt_path="  # lightning-hydra-template's key for the weights to evaluate


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="clsuite eval",
        description="Evaluate a finished run's saved model (keep_weights=true) on every task: class-IL and "
        "task-IL accuracy, beside the run's last row of R.",
    )
    ap.add_argument("run", metavar="RUN", help="a run or sweep job folder holding results.json and model.ckpt, "
                    "or that model.ckpt (also as ckpt_path=<path>)")  # fmt: skip
    ap.add_argument("--split", choices=("test", "val"), default="test", help="the split of every task (default: test)")
    ap.add_argument("--data-root", help="where the run's data files are (default: the run's data.root)")
    args = ap.parse_args(argv)
    args.run = Path(args.run.removeprefix(CKPT_PATH))
    return args


def load(path: Path, split: str = "test", data_root: str | None = None):
    """(results, config, weights file) of the finished run at ``path`` (its folder or its weights
    file); a ``ConfigError`` when there is none, it kept no weights, or it has no ``split``."""
    from clsuite.run.checkpoint import WEIGHTS_FILE
    from clsuite.run.io import RESULTS_FILE
    from clsuite.run.results import as_today, read_run

    named = path.name == WEIGHTS_FILE or (path.exists() and not path.is_dir())  # its weights file, named
    folder, weights = (path.parent, path) if named else (path, path / WEIGHTS_FILE)
    run = read_run(folder / RESULTS_FILE)
    if not run.ok:
        raise ConfigError(f"{folder} holds no finished run ({RESULTS_FILE}: {run.reason}); "
                          "valid: a run or sweep job folder, or its model.ckpt")  # fmt: skip
    if why := not_a_file(weights):
        raise ConfigError(f"{folder} holds no saved weights ({why}); a run keeps them with keep_weights=true")
    cfg = OmegaConf.create(as_today(run.data["config"]))
    if split == "val" and not cfg.data.val_fraction:
        raise ConfigError(f"{folder}'s run has no validation split (data.val_fraction=0); valid: --split test")
    cfg.trainer.accelerator = "auto"  # the device at hand, whatever the run's (not part of its identity)
    if data_root is not None:
        cfg.data.root = data_root
    return run.data, cfg, weights


def not_a_file(weights: Path) -> str | None:
    """What is in place of the weights file when it is not a regular file ("model.ckpt is a FIFO, not a
    file"), else None; from its stat alone (a FIFO is never opened: it would wait for a writer)."""
    from clsuite.core.data.files import kind

    try:
        mode = weights.stat().st_mode  # (a link is followed: what it points to)
    except FileNotFoundError:
        return f"{weights.name} is missing"
    except OSError as e:
        return f"{weights.name} cannot be read ({e.strerror or e})"
    return None if stat.S_ISREG(mode) else f"{weights.name} is a {kind(mode)}, not a file"


def owner(weights: Path) -> str | None:
    """The identity key the checkpoint at ``weights`` names, read without its digest (only to name the
    run an intact checkpoint of another run belongs to), or None when it names none or cannot be read."""
    import io

    import torch

    from clsuite.run.io import read_regular

    try:  # weights_only: tensors and plain containers only, never pickled code
        ckpt = torch.load(io.BytesIO(read_regular(weights, limit=None)), map_location="cpu", weights_only=True)
        key = (ckpt.get("clsuite") or {}).get("identity")
    except Exception:
        return None
    return key if isinstance(key, str) else None


def other_code(res: dict, cfg) -> str | None:
    """Both code parts of the identity (``code <hash>[ + <outside module> <hash>...]``: the code at hand's,
    the run's) where they differ, else None."""
    from clsuite.run.identity import code_part, normalize

    def named(code: dict) -> str:
        outside = (code or {}).get("outside") or {}
        return f"code {(code or {}).get('hash')}" + "".join(f" + {m} {h}" for m, h in sorted(outside.items()))

    now, theirs = code_part(normalize(cfg)), res["identity"].get("code")
    return None if now == theirs else f"{named(now)} here, {named(theirs)} in the run"


def not_the_runs(res: dict, cfg, source) -> str | None:
    """Why the data files at hand are not the run's (its identity), or None."""
    from clsuite.run.identity import data_identity

    ident = res["identity"]
    data = data_identity(cfg, source)
    if data != ident.get("data"):
        theirs = (ident.get("data") or {}).get("files") or {}
        differ = sorted({f for f, _ in set(theirs.items()) ^ set(data["files"].items())})
        return (f"the data files under {cfg.data.root} are not the run's ({', '.join(differ) or 'decoder'} "
                "differ or are missing); --data-root names the folder that holds them")  # fmt: skip
    return None


def evaluate_run(path: Path, split: str = "test", data_root: str | None = None) -> dict:
    """Per task, the class-IL and the task-IL accuracy (%) of the run's saved model on ``split``
    (``columns``), with the run's last rows of R and R_task_il where ``split`` is the one R was
    measured on; ``code``: :func:`other_code` (None: the run's code)."""
    from clsuite.config.check import checked_source
    from clsuite.core.callbacks import evaluate
    from clsuite.core.train import build
    from clsuite.run.checkpoint import AtomicCheckpointIO, CorruptCheckpoint, structure_problem
    from clsuite.run.record import prepare

    res, cfg, weights = load(path, split, data_root)
    code = other_code(res, cfg)
    try:
        source = checked_source(cfg)  # the run's config, as the code at hand reads it
    except ConfigError as e:
        why = f"the code at hand cannot build the run's config: {e}"
        raise ConfigError(f"{why} ({code})" if code else why) from None
    if why := not_the_runs(res, cfg, source):
        raise ConfigError(why)
    prepare(cfg)  # the run's kernels and threads: its numbers again on its machine
    dm, learner, device = build(cfg, source)
    key = res["identity"]["key"]
    try:
        ckpt = AtomicCheckpointIO().load_checkpoint(weights, map_location=device)
        theirs = (ckpt.get("clsuite") or {}).get("identity")
    except CorruptCheckpoint as e:  # (another run's checkpoint without its own digest beside: named as such)
        if (theirs := owner(weights)) in (None, key):
            raise ConfigError(f"{weights} cannot be loaded: {e}") from None
    if theirs != key:
        named = f"identity {theirs[:12]}" if isinstance(theirs, str) else "no identity"
        raise ConfigError(f"{weights} belongs to another run ({named}, this run's is {key[:12]})")
    if why := structure_problem(ckpt, learner):
        raise ConfigError(f"{weights} does not fit the run's config: {why}")
    learner.on_load_checkpoint(ckpt)  # the weights, the memory (iCaRL's class means), the counters (eval_mask=seen)
    class_il, _, task_il = evaluate(learner, dm, split)
    cols = {"class-IL": class_il, "task-IL": task_il}
    if split == res["eval_split"]:  # the split R was measured on: the run's last rows beside
        cols |= {"run's R": res["R"][-1], "run's R_task_il": res["R_task_il"][-1]}
    return {"results": res, "weights": weights, "split": split, "device": str(device), "columns": cols, "code": code}


def report(ev: dict) -> str:
    """A row per task and Acc (the mean over the tasks), a column per accuracy; whether the run's
    last rows came back bit for bit."""
    from clsuite.core.metrics import average_accuracy
    from clsuite.run.experiment import memory_phrase

    res, cols = ev["results"], ev["columns"]
    width = [max(8, len(name)) for name in cols]
    lines = [
        f"{res['method']} on {res['benchmark']}: {memory_phrase(res)}, seed={res['seed']}, reading="
        f"{res.get('reading') or 'unlabelled'}; {ev['weights']} on the {ev['split']} split ({ev['device']})",
        f"{'task':>4}" + "".join(f"  {name:>{w}}" for name, w in zip(cols, width, strict=True)),
    ]
    rows = [*(str(j) for j in range(1, len(cols["class-IL"]) + 1)), "Acc"]
    values = [[*v, average_accuracy([v])] for v in cols.values()]
    for i, label in enumerate(rows):
        lines.append(f"{label:>4}" + "".join(f"  {v[i]:{w}.2f}" for v, w in zip(values, width, strict=True)))
    if "run's R" in cols:
        same = cols["class-IL"] == cols["run's R"] and cols["task-IL"] == cols["run's R_task_il"]
        if same:
            said = "the same, bit for bit" + (" (under code other than the run's)" if ev["code"] else "")
        else:
            other = "code, kernels" if ev["code"] else "kernels"
            said = f"not the same bit for bit ({other}, threads or device other than the run's: docs/notes/NUMERICS.md)"
        lines.append(f"the run's last rows (results.json): {said}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``clsuite eval RUN [--split test|val] [--data-root DIR]``: 0 printed, 2 refused."""
    args = parse(argv)
    try:
        ev = evaluate_run(args.run, args.split, args.data_root)
    except (ConfigError, DataError) as e:
        return fail(str(e))
    if ev["code"]:
        print(f"warning: the code at hand is not the run's ({ev['code']}); evaluated anyway", file=sys.stderr)
    print(report(ev))
    return 0
