"""Sweep plumbing: resume, failure records, the expected grid, and a GPU per parallel job.

Every job of a multirun (``python src/run.py -m ...`` or a sweep config in ``sweeps/``) goes
through :class:`Job`:

- **resume**: a job whose folder already holds a ``results.json`` with the same resolved config
  (:func:`normalize` drops the keys that cannot change the result, :data:`IGNORED_KEYS`) is
  skipped. With a different config the old file is kept as ``results.stale-<n>.json`` and the job
  reruns. ``results.json`` is written atomically at the very end of a run, so a sweep killed at any
  moment loses no finished run. ``CLSUITE_RESUME=0`` reruns everything.
- **reuse**: a finished run is also indexed by the hash of its normalised config in
  ``multirun/.index/``; a job of another experiment with the identical config (e.g. M=100 of the
  memory sweep = Table II) copies that result instead of training again (``reused_from`` names
  the source). ``CLSUITE_REUSE=0`` turns this off.
- **failures**: an exception in a job writes ``failed.json`` (error line, traceback, attempt
  count) beside where ``results.json`` would be, and the other jobs go on; a later rerun retries
  the job and deletes ``failed.json`` when it succeeds. The sweep ends with exit status 1 when a
  job failed, after every job has run.
- **log**: one JSON line per job (ran / skipped / reused / failed, wall time) in
  ``<sweep dir>/sweep_log.jsonl``; :class:`SweepCallback` prints the sweep's summary from it.
- **grid**: :class:`SweepCallback` expands the sweep (sweeper params + command-line overrides) at
  the start into ``<sweep dir>/grid.json``, the list of expected job folders that
  ``scripts/aggregate.py`` checks for missing and failed runs, and rejects an unknown config-group
  option anywhere in the grid with one ``error:`` line (exit 2) before any job starts.
- **GPUs**: ``launcher=joblib`` sets ``CLSUITE_GPU_POOL=1`` in its jobs; each job then takes a free
  slot of a lock-file pool (``fcntl.flock``, released by the OS even when the job dies) and runs on
  that GPU through ``CLSUITE_GPU`` (read by ``clsuite.experiment.pick_device``).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import hashlib
import json
import os
import socket
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from clsuite.io import FAILED_FILE, GRID_FILE, LOG_FILE, RESULTS_FILE, write_json_atomic
from clsuite.io import read_json as _read_json

INDEX_DIR = ".index"

# Keys of the resolved config that do not change a run's result: where it is logged, how it is
# launched, where the data files live, progress output, and which device runs it (CPU and GPU
# give the same result up to float rounding; a sweep resumed on another machine keeps its runs).
IGNORED_KEYS = (
    "experiment",
    "logger",
    "launcher",
    "trainer.progress_bar",
    "trainer.log_every_n_steps",
    "trainer.threads",
    "trainer.device_index",
    "trainer.accelerator",
    "data.root",
    "data.download",
    "data.verify_md5",
)

GROUPS_CHECKED = ("benchmark", "method", "model", "trainer", "logger", "launcher")
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

# Set by SweepCallback.on_multirun_end in the process that launched the sweep (run.py reads it).
LAST_SUMMARY: dict | None = None


# ----------------------------------------------------------------------------- config identity


def _container(cfg) -> dict:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return copy.deepcopy(cfg)


def _drop_nulls(d):
    if isinstance(d, dict):
        return {k: _drop_nulls(v) for k, v in d.items() if v is not None}
    return d


def normalize(cfg) -> dict:
    """The resolved config without :data:`IGNORED_KEYS`, ``hydra`` and null values.

    A key added to the configs later with a null default (``trainer.threads: null``) then leaves
    the identity of the runs made before it unchanged: absent and null compare equal.
    """
    d = _drop_nulls(_container(cfg))
    d.pop("hydra", None)
    for key in IGNORED_KEYS:
        *parents, leaf = key.split(".")
        node = d
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(leaf, None)
    return d


def config_hash(cfg) -> str:
    blob = json.dumps(normalize(cfg), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def config_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two (normalised) configs, with both values."""
    out = []
    for k in sorted(set(a) | set(b), key=str):
        va, vb = a.get(k, "<absent>"), b.get(k, "<absent>")
        if isinstance(va, dict) and isinstance(vb, dict):
            out += config_diff(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}: {va!r} -> {vb!r}")
    return out


def _env_flag(name: str, default: bool = True) -> bool:
    v = os.environ.get(name)
    return default if v is None or v == "" else v.lower() not in ("0", "false", "no", "off")


# ----------------------------------------------------------------------------- one job


class Job:
    """Resume / reuse / failure bookkeeping of one multirun job (folder ``out_dir``)."""

    def __init__(self, cfg, out_dir, sweep_dir=None, overrides=(), job_num: int = 0):
        self.cfg = _container(cfg)
        self.out_dir = Path(out_dir)
        self.sweep_dir = Path(sweep_dir) if sweep_dir is not None else self.out_dir.parent
        self.overrides = list(overrides)
        self.job_num = int(job_num or 0)
        self.norm = normalize(self.cfg)
        self.hash = config_hash(self.norm)
        self.name = self.out_dir.name

    # -- where things are
    @property
    def results_path(self) -> Path:
        return self.out_dir / RESULTS_FILE

    @property
    def failed_path(self) -> Path:
        return self.out_dir / FAILED_FILE

    @property
    def index_path(self) -> Path:
        return self.sweep_dir.parent / INDEX_DIR / f"{self.hash}.json"

    # -- resume
    def finished(self) -> tuple[dict, str] | None:
        """(results, "skipped" | "reused") when this config already has a result, else None."""
        if not _env_flag("CLSUITE_RESUME"):
            return None
        res = _read_json(self.results_path)
        if res is not None and res.get("status", "finished") == "finished":
            if normalize(res.get("config", {})) == self.norm:
                self.failed_path.unlink(missing_ok=True)
                self.register()
                return res, "skipped"
            changed = config_diff(normalize(res.get("config", {})), self.norm)
            stale = self._stale_name()
            os.replace(self.results_path, stale)
            print(
                f"rerun {self.name}: config changed ({'; '.join(changed[:3])}); old results kept as {stale.name}",
                file=sys.stderr,
            )
        if _env_flag("CLSUITE_REUSE"):
            entry = _read_json(self.index_path)
            if entry:
                src = Path(entry["path"])
                src = src if src.is_absolute() else self.index_path.parent.parent / src
                res = _read_json(src)
                if (
                    res is not None
                    and src.resolve() != self.results_path.resolve()
                    and normalize(res.get("config", {})) == self.norm
                ):
                    res["config"]["experiment"] = self.cfg.get("experiment")
                    res["reused_from"] = str(src)
                    write_json_atomic(self.results_path, res)
                    self.failed_path.unlink(missing_ok=True)
                    return res, "reused"
        return None

    def _stale_name(self) -> Path:
        n = 1
        while (p := self.out_dir / f"results.stale-{n}.json").exists():
            n += 1
        return p

    def register(self) -> None:
        """Index this job's finished result by config hash (for reuse by other experiments)."""
        try:
            root = self.index_path.parent.parent
            rel = os.path.relpath(self.results_path.resolve(), root.resolve())
            if not self.index_path.exists():
                write_json_atomic(self.index_path, {"path": rel, "experiment": self.cfg.get("experiment")})
        except OSError:
            pass

    # -- outcome records
    def succeeded(self, wall_s: float) -> None:
        self.failed_path.unlink(missing_ok=True)
        self.register()
        self.log("ran", wall_s=wall_s)

    def failed(self, exc: BaseException, wall_s: float = 0.0) -> str:
        line = error_line(exc)
        prev = _read_json(self.failed_path) or {}
        record = {
            "status": "failed",
            "error": line,
            "attempt": int(prev.get("attempt", 0)) + 1,
            "time": dt.datetime.now().isoformat(timespec="seconds"),
            "host": socket.gethostname(),
            "overrides": self.overrides,
            "benchmark": _get(self.cfg, "benchmark.name"),
            "method": _get(self.cfg, "method.name"),
            "memory": self.cfg.get("memory"),
            "seed": self.cfg.get("seed"),
            "traceback": "".join(traceback.format_exception(exc)),
            "config": self.cfg,
        }
        write_json_atomic(self.failed_path, record)
        self.log("failed", wall_s=wall_s, error=line)
        return line

    def log(self, status: str, **extra) -> None:
        rec = {
            "time": time.time(),
            "sweep_id": os.environ.get("CLSUITE_SWEEP_ID"),
            "job": self.name,
            "status": status,
            **extra,
        }
        try:
            self.sweep_dir.mkdir(parents=True, exist_ok=True)
            with open(self.sweep_dir / LOG_FILE, "a") as f:  # one short line per write: O_APPEND keeps lines whole
                f.write(json.dumps(rec, default=str) + "\n")
        except OSError:
            pass


def error_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _get(d: dict, dotted: str):
    for k in dotted.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


# ----------------------------------------------------------------------------- GPUs


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # (a broken CUDA install means: no GPU)
        return 0


def jobs_per_gpu() -> int:
    return max(1, int(os.environ.get("CLSUITE_JOBS_PER_GPU", "1")))


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def n_parallel_jobs() -> int:
    """Default joblib ``n_jobs``: one per GPU slot when there are GPUs, else one per CPU core."""
    n = gpu_count()
    return n * jobs_per_gpu() if n else cpu_count()


def _lock_dir() -> Path:
    d = os.environ.get("CLSUITE_GPU_LOCK_DIR")
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(d) if d else Path(tempfile.gettempdir()) / f"clsuite-gpu-locks-{uid}"


_HELD: list[int] = []  # GPU slots held by this process (CLSUITE_GPU then comes from the pool)


def _pool_wanted(trainer_cfg) -> bool:
    if not _env_flag("CLSUITE_GPU_POOL", default=False):
        return False
    if os.environ.get("CLSUITE_GPU") and not _HELD:  # the user chose the GPU
        return False
    if trainer_cfg is None:
        return True
    return trainer_cfg.get("device_index") is None and str(trainer_cfg.get("accelerator", "auto")) != "cpu"


@contextlib.contextmanager
def gpu_slot(trainer_cfg=None, job_num: int = 0, poll_s: float = 2.0):
    """Hold a free GPU slot (GPU g, slot s) for the duration; sets ``CLSUITE_GPU=g``.

    Slots are lock files ``gpu<g>.<s>.lock`` in a machine-wide folder, so parallel sweeps on one
    machine share the pool; ``flock`` is released by the kernel when a job dies. Free GPUs are
    filled before a second slot of a GPU is used, starting at GPU ``job_num % n``. Yields the
    GPU index, or None when the pool is off (not under launcher=joblib, a device chosen, no GPU).
    """
    if not _pool_wanted(trainer_cfg):
        yield None
        return
    n = gpu_count()
    if n == 0:
        yield None
        return
    import fcntl

    d = _lock_dir()
    d.mkdir(parents=True, exist_ok=True)
    order = [(s, (job_num + i) % n) for s in range(jobs_per_gpu()) for i in range(n)]
    waited = False
    while True:
        for s, g in order:
            f = open(d / f"gpu{g}.{s}.lock", "a+")  # noqa: SIM115  (closed in finally)
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                continue
            old = os.environ.get("CLSUITE_GPU")
            os.environ["CLSUITE_GPU"] = str(g)
            _HELD.append(g)
            try:
                f.seek(0)
                f.truncate()
                f.write(f"{os.getpid()} {socket.gethostname()}\n")
                f.flush()
                yield g
            finally:
                _HELD.remove(g)
                if old is None:
                    os.environ.pop("CLSUITE_GPU", None)
                else:
                    os.environ["CLSUITE_GPU"] = old
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        if not waited:
            print(f"waiting for a free GPU slot ({n} GPUs x {jobs_per_gpu()} in {d})", file=sys.stderr)
            waited = True
        time.sleep(poll_s)


def _register_resolvers() -> None:
    if not OmegaConf.has_resolver("clsuite_n_jobs"):
        OmegaConf.register_new_resolver("clsuite_n_jobs", n_parallel_jobs)


_register_resolvers()


# ----------------------------------------------------------------------------- the grid


def expand_grid(config: DictConfig) -> list[dict]:
    """The jobs a multirun will launch: ``[{"overrides": [...], "dir": <subdir>}, ...]``.

    Same expansion as Hydra's basic sweeper: ``hydra.sweeper.params`` first, then the
    command-line overrides (which win on the same key), cartesian product in that key order.
    ``dir`` is the job's folder name when ``hydra.sweep.subdir`` is the override dirname.
    """
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    h = config.hydra
    params = h.sweeper.get("params") or {}
    args = [f"{k}={v}" for k, v in params.items()] + list(h.overrides.task)
    parser = OverridesParser.create()
    jobs = BasicSweeper.split_arguments(parser.parse_overrides(args), None)[0]
    od = h.job.config.override_dirname
    subdir_is_dirname = "override_dirname" in str(OmegaConf.to_container(h.sweep, resolve=False).get("subdir"))
    out = []
    for job in jobs:
        parsed = parser.parse_overrides(job)
        name = get_overrides_dirname(parsed, list(od.exclude_keys), od.item_sep, od.kv_sep)
        out.append({"overrides": list(job), "dir": name if subdir_is_dirname else None})
    return out


def unknown_options(jobs: list[dict], conf_dir: Path = CONF_DIR) -> list[str]:
    """``group 'option'`` for every config-group option in the grid that has no yaml file."""
    bad: dict[str, set] = {}
    for job in jobs:
        for o in job["overrides"]:
            key, _, value = o.partition("=")
            key = key.lstrip("+~")
            if key in GROUPS_CHECKED and (conf_dir / key).is_dir() and not (conf_dir / key / f"{value}.yaml").is_file():
                bad.setdefault(key, set()).add(value)
    return [
        f"unknown {k} {', '.join(repr(v) for v in sorted(vs))} in the sweep; valid choices: "
        + ", ".join(sorted(p.stem for p in (conf_dir / k).glob("*.yaml")))
        for k, vs in sorted(bad.items())
    ]


def summarize(sweep_dir, sweep_id: str | None = None, grid: list[dict] | None = None) -> dict:
    """Counts of ran / skipped / reused / failed jobs of one sweep invocation (its log lines)."""
    sweep_dir = Path(sweep_dir)
    counts = {"ran": 0, "skipped": 0, "reused": 0, "failed": 0}
    failed: list[str] = []
    path = sweep_dir / LOG_FILE
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if sweep_id is not None and rec.get("sweep_id") != sweep_id:
                continue
            counts[rec["status"]] = counts.get(rec["status"], 0) + 1
            if rec["status"] == "failed":
                failed.append(f"{rec['job']}: {rec.get('error', '')}")
    out = {**counts, "failed_jobs": failed, "sweep_dir": str(sweep_dir)}
    if grid is not None:
        out["expected"] = len(grid)
        dirs = [g["dir"] for g in grid if g.get("dir")]
        out["finished_total"] = sum((sweep_dir / d / RESULTS_FILE).is_file() for d in dirs)
    return out


try:
    from hydra.experimental.callback import Callback as _HydraCallback
except ImportError:  # pragma: no cover
    _HydraCallback = object  # type: ignore[assignment,misc]


class SweepCallback(_HydraCallback):
    """Hydra callback (conf/config.yaml ``hydra.callbacks.sweep``): grid check + grid.json + summary."""

    def __init__(self) -> None:
        self.grid: list[dict] | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_id = uuid.uuid4().hex[:12]
        os.environ["CLSUITE_SWEEP_ID"] = sweep_id  # inherited by joblib workers and submitit jobs
        sweeper = str(config.hydra.sweeper.get("_target_", ""))
        if not sweeper.endswith("BasicSweeper"):
            return
        try:
            self.grid = expand_grid(config)
        except Exception as e:  # (glob() sweeps and the like: no grid file)
            print(f"warning: could not expand the sweep grid ({error_line(e)}); no grid.json", file=sys.stderr)
            return
        errors = unknown_options(self.grid)
        if errors:
            print(f"error: {errors[0]}", file=sys.stderr)
            sys.exit(2)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        write_json_atomic(
            sweep_dir / GRID_FILE,
            {
                "experiment": config.get("experiment"),
                "sweep_id": sweep_id,
                "created": dt.datetime.now().isoformat(timespec="seconds"),
                "host": socket.gethostname(),
                "argv": sys.argv,
                "launcher": str(config.hydra.launcher.get("_target_", "")),
                "n_jobs": len(self.grid),
                "jobs": self.grid,
            },
        )
        print(f"sweep {config.get('experiment')}: {len(self.grid)} jobs -> {sweep_dir}/", file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global LAST_SUMMARY
        s = summarize(str(config.hydra.sweep.dir), os.environ.get("CLSUITE_SWEEP_ID"), self.grid)
        LAST_SUMMARY = s
        exp = config.get("experiment")
        msg = (
            f"sweep {exp}: {s['ran']} ran, {s['skipped']} skipped (finished before), {s['reused']} reused "
            f"(same config in another experiment), {s['failed']} failed"
        )
        if "expected" in s:
            msg += f"; {s['finished_total']}/{s['expected']} of the grid have results"
        print(msg, file=sys.stderr)
        for line in s["failed_jobs"][:20]:
            print(f"  failed: {line}", file=sys.stderr)
        print(f"  tables and figures: python scripts/aggregate.py {exp}", file=sys.stderr)
