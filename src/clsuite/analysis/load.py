"""Load the runs of an experiment: results files -> one row per distinct run, and the sweep's
status. Steps of ``load_experiment``: docs/GUIDE.md, "Loading runs"; what is trusted and
kept: docs/INTEGRITY.md, sections 1-2.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from clsuite.analysis.stats import CONDITIONS, COSTS, KEYS
from clsuite.config.numerics import label as numerics_label
from clsuite.config.paths import dirname_text
from clsuite.config.schema import dotted_get
from clsuite.core.metrics import METRICS, QUANTITIES, first_task_drop, first_task_final
from clsuite.run.identity import code_identity, config_hash, normalize
from clsuite.run.io import FAILED_FILE, GRID_FILE, RESULTS_FILE, Unreadable, load_json, read_failure
from clsuite.run.results import as_today, read_run


def short(key: str) -> str:
    """A grouping key as the paper writes it in tables and figures (``memory`` -> ``M``); others unchanged."""
    return {"memory": "M", "lambda": "λ", "tau": "τ"}.get(key, key)


SKIP_DIRS = {".submitit", "wandb", ".hydra", "csv", ".index"}
UNLABELLED = "unlabelled"
READINGS = ("paper_text", "mir_code")  # conf/reading/: the paper's text, MIR's public code
_FLAT_SKIP = {"seed", "benchmark.name", "method.name", "reading", *CONDITIONS}


@dataclass
class Experiment:
    """The distinct runs of one experiment folder and its status against the sweep's grid."""

    name: str
    path: Path
    runs: pd.DataFrame
    status: dict = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.runs.empty


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"a.b": value}`` of a nested dict; lists as JSON text."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True) if isinstance(v, list) else v
    return out


def flat_config(cfg: dict) -> dict:
    """A run's config as its cells compare it: flattened, in today's names, without the cell's own keys."""
    return {k: v for k, v in flatten(normalize(as_today(cfg))).items() if k not in _FLAT_SKIP}


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _code(res: dict) -> tuple[str, str]:
    """(commit, code) of a run. commit: where its code came from, the commit's first 10 digits, ``+dirty``
    with uncommitted changes under src/ or conf/ (``identity.provenance``), ``unknown`` outside a git
    checkout. code: its version, the content hash ``identity.code.hash``. Files made before content
    hashes: the commit from ``identity.code.commit`` / ``dirty_hash``, the code ``commit:<commit>[+<dirty
    hash>]`` (what their identity keyed on)."""
    code = dotted_get(res, "identity.code", {}) or {}
    prov = dotted_get(res, "identity.provenance")
    if isinstance(prov, dict):
        commit, dirty = prov.get("commit"), prov.get("dirty")
    else:
        commit = code.get("commit")
        dirty = commit and code.get("dirty_hash")  # installed packages had a dirty_hash and no commit
    if code.get("hash"):
        version = str(code["hash"])
    elif code.get("commit") or code.get("dirty_hash"):
        version = f"commit:{str(code.get('commit') or 'unknown')[:10]}" + (
            f"+{code['dirty_hash']}" if code.get("dirty_hash") else ""
        )
    else:
        version = "unknown"
    return str(commit or "unknown")[:10] + ("+dirty" if dirty else ""), version


def real_data(res: dict) -> bool:
    """Made on a real data set: not ``benchmark.source=synthetic`` and every data file has an md5."""
    files = dotted_get(res, "identity.data.files")
    return (
        dotted_get(res, "config.benchmark.source") != "synthetic"
        and isinstance(files, dict)
        and bool(files)
        and all(isinstance(v, str) and v for v in files.values())
    )


def order_readings(readings) -> list[str]:
    """``paper_text``, ``mir_code``, other readings alphabetically, ``unlabelled`` last."""
    rs = set(readings)
    known = [r for r in READINGS if r in rs]
    return known + sorted(rs - set(known) - {UNLABELLED}) + ([UNLABELLED] if UNLABELLED in rs else [])


def files(exp_dir: Path, name: str) -> list[Path]:
    return sorted(p for p in Path(exp_dir).rglob(name) if not (SKIP_DIRS & set(p.relative_to(exp_dir).parts[:-1])))


def run_row(res: dict, job: str) -> dict:
    cfg = res.get("config", {})
    R = np.asarray(res.get("R", []), dtype=float)
    m = res.get("metrics", {})
    env = dotted_get(res, "identity.env", {}) or {}
    versions = res.get("versions", {}) or {}
    threads = env.get("torch_threads", dotted_get(cfg, "trainer.threads"))
    dev, gpu = str(res.get("device", "unknown")), versions.get("gpu")  # cuda:0 (<GPU model>) when named
    commit, code = _code(res)
    reading = res["reading"] if res.get("reading") is not None else cfg.get("reading")
    reading = reading.get("name") if isinstance(reading, dict) else reading  # a config group holding its name
    return {
        "job": job,
        "benchmark": res.get("benchmark", dotted_get(cfg, "benchmark.name")),
        "method": res.get("method", dotted_get(cfg, "method.name")),
        "reading": str(reading) if reading else UNLABELLED,
        "memory": int(res.get("memory", cfg.get("memory", 0))),
        "memory_per_class": bool(cfg.get("memory_per_class", False)),  # M per class (mir_code) or in total
        "tau": _num(cfg.get("tau")),
        "lambda": _num(cfg.get("lambda")),
        "seed": int(res.get("seed", cfg.get("seed", 0))),
        **{k: _num(m.get(k)) for k in METRICS},
        "acc_task_il": _num(m.get("acc_task_il")),  # NaN: made before the task-IL matrix
        "first_task_final": first_task_final(R),
        "first_task_drop": first_task_drop(R),
        **{k: _num(res.get(k)) for k in COSTS},  # NaN: not recorded (no GPU; files made before the peaks)
        "cpu_time_s": _num(res.get("cpu_time_s")),  # the run's own CPU seconds; NaN: files made before it
        "device": f"{dev} ({gpu})" if gpu and dev.startswith("cuda") else dev,
        "torch_threads": "unknown" if threads is None else str(threads),
        "torch": str(versions.get("torch", env.get("torch", "unknown"))),
        "cpu": str(versions.get("cpu") or versions.get("platform") or "unknown"),
        "numerics": numerics_label(env.get("numerics")),  # the CPU kernels in effect (clsuite.config.numerics)
        "commit": commit,
        "code": code,
        "real_data": real_data(res),
        "key": str(res["identity"]["key"]),  # sealed files only: the reader checked it
        "reused_from": res.get("reused_from"),
        "R": R,
        "b": np.asarray(res.get("b", []), dtype=float),
        "flat": flat_config(cfg),
        "versions": versions,
    }


COLUMNS = [
    "job", "benchmark", "method", "reading", *CONDITIONS, "memory_per_class", "variant", "seed", *QUANTITIES, *COSTS, "cpu_time_s", "device", "torch_threads", "torch", "cpu", "numerics", "commit", "code", "real_data", "key", "reused_from",
    "R", "b", "flat", "versions",
]  # fmt: skip


def split_items(text: str) -> list[str]:
    """``"a=1,b=[2,3]"`` -> ``["a=1", "b=[2,3]"]``: Hydra's ``key=value`` list joined by commas (a
    value may hold commas: a new item starts only where a key and ``=`` follow the comma)."""
    return [i for i in re.split(r",(?=[\w.@/+-]+=)", text) if "=" in i] if text else []


def job_overrides(job: str) -> str:
    """What a sweep job changed besides the grouping keys and the seed: its folder name (Hydra's
    ``override_dirname``, ``key=value`` joined by commas; values may hold commas) less those keys.
    ``benchmark=split_mnist,memory_per_class=False,method=gem,seed=3`` -> ``memory_per_class=False``."""
    grouping = {"benchmark", "method", "reading", *CONDITIONS, "seed"}
    return ",".join(i for i in split_items(dirname_text(Path(job).name)) if i.split("=", 1)[0] not in grouping)


def varying_keys(flats) -> set[str]:
    """The keys whose value differs between flattened configs (a key one of them lacks: null there)."""
    flats = list(flats)
    keys = {k for f in flats for k in f}
    return {k for k in keys if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flats}) > 1}


def read_grid(exp_dir) -> dict | None:
    """The experiment's ``grid.json``, None when there is none. One that exists but is not a grid the
    sweep wrote (not a regular file, too large, not valid JSON, not an object whose ``jobs`` each name
    one folder of the experiment, a link to nothing) is :class:`~clsuite.run.io.Unreadable` naming it:
    without it, a results file in a grid folder could not be checked against the grid's run there."""
    path = Path(exp_dir) / GRID_FILE
    try:
        grid = load_json(path)
    except FileNotFoundError:
        if not path.is_symlink():
            return None
        why = "a link to nothing"
    except Unreadable as e:
        why = str(e)
    else:
        why = _not_a_grid(grid)
        if why is None:
            return grid
    raise Unreadable(
        f"{path}: {why}; its runs cannot be checked against their sweep's grid: restore it (rerunning the sweep "
        "writes it again), or remove it to read the runs without a grid"
    )


def _not_a_grid(grid) -> str | None:
    """Why parsed JSON is not a sweep's grid (None when it is): each job's ``dir`` is one folder name
    (None: a sweep whose ``hydra.sweep.subdir`` is not the override dirname)."""
    if not isinstance(grid, dict):
        return f"not a JSON object (a {type(grid).__name__})"
    jobs = grid.get("jobs")
    dirs = [j.get("dir") if isinstance(j, dict) else "/" for j in jobs] if isinstance(jobs, list) else ["/"]
    if not all(d is None or (isinstance(d, str) and Path(d).name == d and d not in (".", "..")) for d in dirs):
        return "its jobs are not a list of jobs, each with its folder's name"
    return None


def grid_jobs(grid: dict | None) -> dict[str, dict] | None:
    """``{folder: job}`` of a grid (:func:`read_grid`; each job: its overrides and, in grids of the
    current format, ``config_hash``), or None without a grid or when its jobs name no folders (a
    sweep whose ``hydra.sweep.subdir`` is not the override dirname)."""
    jobs = (grid or {}).get("jobs")
    if not isinstance(jobs, list) or not all(isinstance(j.get("dir"), str) for j in jobs):
        return None
    return {j["dir"]: j for j in jobs}


def not_the_grids(res: dict, job: dict) -> str | None:
    """Why a sealed results file is not the run the grid asked for at its folder (None when it is, or
    when the grid recorded no config hash): its normalised config differs from the grid's job."""
    want = job.get("config_hash")
    if not isinstance(want, str) or config_hash(res["config"]) == want:
        return None
    differ = []
    for item in split_items(dirname_text(job["dir"])):  # the folder's own key=value pairs, where they disagree
        key, _, value = item.partition("=")
        got = dotted_get(res["config"], f"{key}.name" if key in ("benchmark", "method") else key, "<absent>")
        if str(got) != value:
            differ.append(f"{key}={got}")
    what = f" ({', '.join(differ)})" if differ else ""
    return f"not the run the grid asked for at this folder: its config is another job's{what}"


def read_runs(exp_dir, grid: dict[str, dict] | None = None) -> tuple[list[dict], list[dict]]:
    """One row per sealed results file of ``exp_dir`` (``clsuite.run.results.read_run``), and the files
    left out: ``[{"job", "reason"}]`` (unsealed, edited, malformed, not finished, or in a folder of
    ``grid`` (:func:`grid_jobs`) without the run the grid asked for there)."""
    exp_dir = Path(exp_dir)
    rows, rejected = [], []
    for path in files(exp_dir, RESULTS_FILE):
        job = str(path.parent.relative_to(exp_dir))
        run = read_run(path)
        why = run.reason if not run.ok else not_the_grids(run.data, grid[job]) if grid and job in grid else None
        if why:
            rejected.append({"job": job, "reason": why})
            continue
        rows.append({**run_row(run.data, job), "mtime": _mtime(path), "in_grid": bool(grid) and job in grid})
    return rows, rejected


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _keep_first(df: pd.DataFrame, by: list[str], **order: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per value of ``by``: the first by ``order`` (then the job name); the others, each with
    ``kept``, the job kept in its place."""
    df = df.assign(**order).sort_values([*order, "job"])
    df["kept"] = df.groupby(by, dropna=False, sort=False)["job"].transform("first")
    first = df["job"] == df["kept"]
    return df[first].drop(columns=[*order, "kept"]), df[~first]


def current_code() -> str | None:
    """The content hash of the code in this checkout (``clsuite.run.identity.code_identity``)."""
    try:
        return code_identity()["hash"]
    except OSError:
        return None


def load_runs(exp_dir, grid: dict | None = None):
    """Steps 1-5: the distinct runs of ``exp_dir`` (a DataFrame of :data:`COLUMNS`), the copies of an identity,
    ``[(job, kept job)]``, and the files left out, ``{"rejected": [...], "seed_duplicates": [...]}``.
    ``grid``: its ``grid.json``, already read (``{}``: none; None: read it now)."""
    rows, rejected = read_runs(exp_dir, grid_jobs(read_grid(exp_dir) if grid is None else grid))
    df = pd.DataFrame(rows, columns=[*COLUMNS, "mtime", "in_grid"])
    df, copies = _keep_first(df, ["key"], grid_last=~df["in_grid"].astype(bool), copy=df["reused_from"].notna())
    cells = df.groupby([k for k in KEYS if k != "variant"], dropna=False, sort=False)["flat"]
    varying = sorted(set().union(*(varying_keys(flats) for _, flats in cells)))  # step 4: keys that vary in a cell
    df["variant"] = [",".join(f"{k}={f.get(k)}" for k in varying) for f in df["flat"]]
    code = current_code() if rows else None
    df, others = _keep_first(df, [*KEYS, "seed"], other_code=df["code"] != code,
                             grid_last=~df["in_grid"].astype(bool), older=-df["mtime"])  # fmt: skip
    kept_code = df.set_index("job")["code"]
    why = {True: "the current code's run", False: "the newest results file"}
    seed_dups = [
        {"job": j, "kept": k, "why": why[kept_code[k] == code]} for j, k in sorted(zip(others["job"], others["kept"]))
    ]
    df = df.sort_values("job")[COLUMNS].reset_index(drop=True)
    return df, list(zip(copies["job"], copies["kept"])), {"rejected": rejected, "seed_duplicates": seed_dups}


COPY = "the same run as one counted (a copy, or a link to its results file)"  # why a results file is skipped
OTHER_SEED = "another run of a seed counted (one run per seed)"


def status(exp_dir, grid: dict, runs: pd.DataFrame, dropped: list, left_out: dict) -> dict:
    """Step 6; a failed job: a ``failed.json`` and no results file beside it."""
    exp_dir = Path(exp_dir)
    failures = []
    for path in files(exp_dir, FAILED_FILE):
        if not (path.parent / RESULTS_FILE).is_file():
            rec = read_failure(path) or {}
            fields = {k: rec.get(k, d) for k, d in (("error", ""), ("attempt", 1), ("time", ""), ("host", ""))}
            failures.append({"job": str(path.parent.relative_to(exp_dir)), **fields})
    done = set(runs["job"]) | {d for d, _ in dropped} | {d["job"] for d in left_out["seed_duplicates"]}
    envs = runs.groupby(["device", "torch_threads", "torch", "numerics"]).size()
    out = {
        "finished": len(runs),
        "failed": failures,
        "duplicates": [{"job": d, "same_run_as": k} for d, k in dropped],
        "rejected": left_out["rejected"],  # results files never counted, and why
        "seed_duplicates": left_out["seed_duplicates"],  # other runs of a cell's seed, not pooled
        "stale_files": len(files(exp_dir, "results.stale-*.json")),
        "grid": None,
        "missing": [],
        "outside_grid": [],  # finished runs outside the grid's folders that are counted
        "outside_grid_skipped": [],  # and those that are not: {"job", "why"} (COPY, OTHER_SEED)
        "commits": runs["commit"].value_counts().to_dict(),
        # the runs of each content hash of the code and the commits that made them (two commits, one version)
        "code_versions": {
            str(c): {"runs": len(g), "commits": sorted(set(g["commit"]))} for c, g in runs.groupby("code", sort=True)
        },
        "environments": {" / ".join(k): v for k, v in envs.to_dict().items()},
    }
    jobs = grid_jobs(grid)
    if jobs is not None:
        out["grid"] = {
            "expected": len(jobs),
            "finished": len(done & set(jobs)),  # the grid's folders that hold their own run
            "created": grid.get("created"),
            "argv": grid.get("argv"),
        }
        skip = done | {f["job"] for f in failures} | {r["job"] for r in left_out["rejected"]}
        out["missing"] = [d for d in jobs if d not in skip]
        out["outside_grid"] = sorted(set(runs["job"]) - set(jobs))  # counted: distinct runs in other folders
        skipped = [(d, COPY) for d, _ in dropped] + [(d["job"], OTHER_SEED) for d in left_out["seed_duplicates"]]
        out["outside_grid_skipped"] = [{"job": d, "why": why} for d, why in sorted(skipped) if d not in jobs]
    return out


def load_experiment(exp_dir) -> Experiment:
    exp_dir = Path(exp_dir)
    grid = read_grid(exp_dir) or {}  # read once: the runs' check against it, and the status
    runs, dropped, left_out = load_runs(exp_dir, grid)
    return Experiment(exp_dir.name, exp_dir, runs, status(exp_dir, grid, runs, dropped, left_out))


def distinct_runs(experiments) -> pd.DataFrame:
    """The runs of several experiments, each run (identity) once however many experiments reuse it."""
    frames = [e.runs for e in experiments if not e.empty]
    return pd.concat(frames, ignore_index=True).drop_duplicates("key") if frames else pd.DataFrame()


def experiment_names(multirun) -> list[str]:
    """The experiment folders of ``multirun`` that hold a results file, a failure record or a grid."""
    root = Path(multirun)
    if not root.is_dir():
        return []
    return sorted(
        d.name
        for d in root.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and (os.path.lexists(d / GRID_FILE) or files(d, RESULTS_FILE) or files(d, FAILED_FILE))
    )


def select(df: pd.DataFrame, **where) -> pd.DataFrame:
    """Rows matching every ``key=value`` (floats compared with a tolerance); ``None`` matches all."""
    mask = np.ones(len(df), dtype=bool)
    for k, v in where.items():
        if v is None:
            continue
        if k in CONDITIONS:
            mask &= np.isclose(df[k].astype(float), float(v))
        else:
            mask &= (df[k] == v).to_numpy()
    return df[mask]
