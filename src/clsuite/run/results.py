"""The one reader of results files: a run's ``results.json`` -> a sealed run, or the reason it is not one.

Every layer reads results through :func:`read_run`, so a file counts everywhere or nowhere; its checks,
in order, each with its line: docs/INTEGRITY.md, section 1.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from clsuite.core.metrics import METRICS, all_metrics, task_il_metrics
from clsuite.run.io import Unreadable, canonical, load_json, sha256

TOLERANCE = 1e-6  # metrics recomputed from R and b must match the written ones to this (absolute)
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SealedRun:
    """A results file that passed every check: ``data`` is its parsed content."""

    path: Path
    data: dict

    ok = True


@dataclass(frozen=True)
class Rejected:
    """A results file that is never counted, and why (one line)."""

    path: Path
    reason: str
    data: dict | None = None  # the parsed file when it was a JSON object (to say why, never to count)

    ok = False


_MOVED = re.compile(r"^clsuite\.(data|memory|replay|methods|models|learner|metrics|callbacks|errors)\.")


def as_today(config):
    """A recorded config (or one value of it) naming today's modules: a run made before the science moved
    into ``clsuite.core`` (docs/DEVELOPING.md) names ``clsuite.methods.er.ER`` for
    ``clsuite.core.methods.er.ER``; for the code that builds or reads a recorded run (replay, eval, the
    analysis' flat configs)."""
    if isinstance(config, dict):
        return {k: as_today(v) for k, v in config.items()}
    if isinstance(config, list):
        return [as_today(v) for v in config]
    return _MOVED.sub(r"clsuite.core.\1.", config) if isinstance(config, str) else config


def read_run(path) -> SealedRun | Rejected:
    """The results file at ``path`` as a :class:`SealedRun`, else :class:`Rejected` with the reason."""
    path = Path(path)
    try:
        res = load_json(path)  # a regular file, bounded in size and nesting (clsuite.run.io)
    except FileNotFoundError:
        return Rejected(path, "missing")
    except Unreadable as e:
        return Rejected(path, str(e))
    try:
        reason = problem(res)
    except Exception as e:  # whatever a hostile file does to a check: a reason, never a crash
        reason = f"could not be checked ({type(e).__name__}: {str(e)[:200]})"
    if reason:
        return Rejected(path, reason, res if isinstance(res, dict) else None)
    return SealedRun(path, res)


def problem(res) -> str | None:
    """Why a parsed results file is not a sealed, well-formed finished run (None when it is)."""
    if not isinstance(res, dict):
        return f"not a JSON object (a {type(res).__name__})"
    if res.get("status") != "finished":
        return f"status {res.get('status')!r}, not 'finished'"
    if "digest" not in res:
        return "unsealed (no digest): not written by a run, or edited"
    if not seal_ok(res):
        return "edited after it was written (its digest does not match its content)"
    return schema_problem(res)


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _accuracies(v, n: int | None = None) -> bool:
    """A list (of length ``n``) of finite numbers in [0, 100]."""
    if not isinstance(v, list) or (n is not None and len(v) != n):
        return False
    return all(_number(x) and math.isfinite(x) and 0 <= x <= 100 for x in v)


def _same(a, b) -> bool:
    return _number(a) and ((math.isnan(a) and math.isnan(b)) or abs(a - b) <= TOLERANCE)


def schema_problem(res: dict) -> str | None:
    """The first schema violation of a sealed results file (docs/INTEGRITY.md, section 1), or None."""
    for key in ("benchmark", "method"):
        if not isinstance(res.get(key), str) or not res[key]:
            return f"'{key}' is not a name: {res.get(key)!r}"
    for key in ("seed", "memory"):
        if not _whole(res.get(key)) or res[key] < 0:
            return f"'{key}' is not a whole number >= 0: {res.get(key)!r}"
    cfg = res.get("config")
    if not isinstance(cfg, dict):
        return "'config' is not an object"
    b, R = res.get("b"), res.get("R")
    if not isinstance(b, list) or not b or not _accuracies(b):
        return "'b' is not a list of accuracies in [0, 100]"
    T = len(b)
    joint = isinstance(cfg.get("method"), dict) and cfg["method"].get("joint") is True
    rows = (T, 1) if joint else (T,)
    if not isinstance(R, list) or len(R) not in rows or not all(_accuracies(r, T) for r in R):
        shape = "1 x T (Joint) or T x T" if joint else "T x T"
        return f"'R' is not a {shape} matrix of accuracies in [0, 100] (T = len(b) = {T})"
    m = res.get("metrics")
    if not isinstance(m, dict) or any(k not in m for k in METRICS):
        return f"'metrics' lacks one of {', '.join(METRICS)}"
    for k, v in all_metrics(R, b).items():
        if not _same(m[k], v):
            return f"metrics.{k} = {m[k]!r} is not the value recomputed from R and b ({v:.6g})"
    if "R_task_il" in res and (why := _task_il_problem(res["R_task_il"], len(R), T, m)):
        return why  # (results files made before the task-IL matrix lack it: accepted)
    for key, value in (("seed", res["seed"]), ("benchmark.name", res["benchmark"]), ("method.name", res["method"])):
        head, _, leaf = key.rpartition(".")
        node = cfg.get(head) if head else cfg
        if not isinstance(node, dict) or node.get(leaf) != value:
            return f"config.{key} does not match the file's {key.split('.')[0]} ({value!r})"
    return identity_problem(res.get("identity"), cfg)


def _task_il_problem(R_task_il, rows: int, T: int, m: dict) -> str | None:
    """``R_task_il`` has R's shape (``rows`` x T) and its metrics are the ones recomputed from it."""
    if not isinstance(R_task_il, list) or len(R_task_il) != rows or not all(_accuracies(r, T) for r in R_task_il):
        return "'R_task_il' is not a matrix of R's shape of accuracies in [0, 100]"
    for k, v in task_il_metrics(R_task_il).items():
        if not _same(m.get(k), v):
            return f"metrics.{k} = {m.get(k)!r} is not the value recomputed from R_task_il ({v:.6g})"
    return None


def identity_problem(identity, cfg: dict) -> str | None:
    if not isinstance(identity, dict):
        return "no 'identity' object (made before identities, or edited)"
    key = identity.get("key")
    if not isinstance(key, str) or not _HEX64.fullmatch(key):
        return f"identity.key is not a sha256: {key!r}"
    if canonical(identity.get("config")) != canonical(normalize(cfg)):
        return "identity.config is not the file's config (normalised)"
    code = identity.get("code")  # the layout since content hashes: code.hash, data, env (older ones: unchecked)
    current = isinstance(code, dict) and "hash" in code and all(k in identity for k in PARTS)
    if current and key_of(identity) != key:
        return "identity.key is not the hash of the identity's parts"
    return None


PARTS = ("config", "code", "data", "env")  # what an identity's key hashes (clsuite.run.identity; not provenance)


def key_of(identity: dict) -> str:
    """The key of an identity: the sha256 of the canonical JSON of its :data:`PARTS`."""
    return sha256(canonical({k: identity[k] for k in PARTS}))


# ----------------------------------------------------------------------------- the config part of an identity


# Keys that cannot change a run's result (docs/GUIDE.md, "Identity"), also left out of sweep folder names
# (conf/config.yaml exclude_keys; tests/lab/test_identity.py checks the two agree). Threads, device: the env part.
IGNORED_KEYS = (
    "experiment",
    "cites",  # documentation: the reading's source lines (conf/reading_family/)
    "resume",
    "reuse",
    "checkpoint",  # when a run saves its state (clsuite.run.checkpoint): a resumed run's numbers are the same
    "checkpoint_every",
    "checkpoint_dir",
    "keep_weights",
    "logger",
    "callbacks",  # the run's bookkeeping (conf/callbacks/)
    "launcher",
    "trainer.progress_bar",
    "trainer.log_every_n_steps",
    "trainer.threads",
    "trainer.device_index",
    "trainer.accelerator",
    "trainer._target_",  # the Trainer's class and its fixed bookkeeping arguments (conf/trainer/default.yaml)
    "trainer.max_epochs",  # raised by each task's fit (clsuite.core.train.train_tasks)
    "trainer.enable_model_summary",
    "trainer.num_sanity_val_steps",  # (no validation loop: R is a callback's)
    "trainer.limit_val_batches",
    "data.root",
    "data.download",
    "data.verify_md5",
    "data.cache_dir",  # where decoded arrays are kept: keyed by the archive's checksum and the decoder
)


def _container(cfg) -> dict:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return copy.deepcopy(cfg)


def _drop_nulls(d):
    if isinstance(d, dict):
        return {k: _drop_nulls(v) for k, v in d.items() if v is not None}
    return d


def normalize(cfg) -> dict:
    """The resolved config without :data:`IGNORED_KEYS`, ``hydra`` and null values (absent and null
    compare equal: a key added later with a null default keeps the identity of the runs made before);
    of ``callbacks``, the stock (non-clsuite) ones stay, since they can move the numbers."""
    d = _drop_nulls(_container(cfg))
    d.pop("hydra", None)
    nodes = d.get("callbacks") if isinstance(d.get("callbacks"), dict) else {}
    stock = {
        k: v for k, v in nodes.items() if isinstance(v, dict) and not str(v.get("_target_", "")).startswith("clsuite.")
    }
    for key in IGNORED_KEYS:
        *parents, leaf = key.split(".")
        node = functools.reduce(lambda n, p: n.get(p) if isinstance(n, dict) else None, parents, d)
        if isinstance(node, dict):
            node.pop(leaf, None)
    if stock:  # a stock Lightning callback can move the numbers (the suite's are bookkeeping): in the identity
        d["callbacks"] = stock
    return d


def config_hash(cfg) -> str:
    return sha256(canonical(normalize(cfg)))[:20]


# ----------------------------------------------------------------------------- the seal


def _digest(results: dict) -> str:
    """sha256 of the results' canonical JSON, everything but the digest."""
    return sha256(canonical({k: v for k, v in results.items() if k != "digest"}))


def seal(results: dict) -> dict:
    results["digest"] = _digest(results)
    return results


def seal_ok(results: dict) -> bool:
    """False when the file was edited after it was written (or carries no digest)."""
    return results.get("digest") == _digest(results)
