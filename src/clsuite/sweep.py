"""Sweep plumbing: identity-checked resume, job locks, failure records, the grid, a GPU per job.

Every job of a multirun (``clsuite -m ...``, ``python src/run.py -m ...`` or a sweep config in
``sweeps/``) goes through :class:`Job` (driven by ``clsuite.cli``):

- **lock** (``clsuite.locks``): the job first creates ``running.lock`` in its folder atomically (pid, host, process
  start time; a heartbeat keeps it fresh). A second sweep, a rerun, or a rerun after a killed
  submitter finds it held and leaves the job alone (``busy``); a lock whose holder died (same
  host: the pid is gone or was reused; another host: no heartbeat for ``CLSUITE_LOCK_STALE_S``,
  default 600 s) is stale and taken over.
- **resume**: a job whose folder already holds a sealed ``results.json`` with the same
  *identity* (``clsuite.identity``: config + code + data + threads/device/torch) is skipped.
  Otherwise the old file is kept as ``results.stale-<n>.json``, the job reruns, and the sweep
  summary counts why (config / code / data / threads / device / torch changed, no identity,
  edited by hand). ``resume=config_only`` (or ``CLSUITE_RESUME=config_only``) compares the
  normalised config only; ``resume=off`` (or ``CLSUITE_RESUME=0``) reruns everything.
- **reuse**: a finished run is also indexed by its identity key in ``multirun/.index/``; a job of
  another experiment with the identical identity (e.g. M=100 of the memory sweep = Table II)
  copies that result instead of training again (``reused_from`` names the source).
  ``CLSUITE_REUSE=0`` turns this off. Results that reached ``multirun/`` without passing through a
  sweep's bookkeeping (copied from another machine or folder) are indexed when the next sweep
  starts (:func:`reindex`), so they are reused too.
- **failures**: an exception in a job (divergence, a bad file, a crash) writes ``failed.json``
  (error line, traceback, attempt count) where ``results.json`` would be, and the other jobs go
  on; a SIGTERM / SIGINT writes it with ``status: interrupted``. A rerun retries exactly the
  jobs without results; ``failed.json`` is deleted on success. Writing the record cannot end the
  sweep either (a full disk: a warning, no temporary file left). The sweep exits 1 when a job
  failed, 143 / 130 when it was interrupted.
- **log**: one JSON line per job (ran / skipped / reused / busy / interrupted / failed, wall time,
  why it reran) in ``<sweep dir>/sweep_log.jsonl``; :class:`SweepCallback` prints the summary.
- **grid**: :class:`SweepCallback` expands the sweep (sweeper params + command-line overrides),
  composes and validates *every* job (``clsuite.config.validate``: one ``error:`` line, exit 2,
  before any job starts) and only then writes ``<sweep dir>/grid.json``, the expected job
  folders ``scripts/aggregate.py`` checks for missing and failed runs. Folder names longer than
  :data:`MAX_DIRNAME` characters are shortened with a hash (:func:`job_dirname`); the job writes
  its overrides inside (``overrides.json``).
- **GPUs**: ``launcher=joblib`` sets ``CLSUITE_GPU_POOL=1`` in its jobs; each job then takes a free
  slot of a lock-file pool (``fcntl.flock``, released by the OS even when the job dies) and runs on
  that GPU through ``CLSUITE_GPU`` (read by ``clsuite.experiment.pick_device``).
"""

from __future__ import annotations

import contextlib
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

from clsuite import identity as ident
from clsuite.config import RESUME_MODES, ConfigError, dotted_get, unknown_option
from clsuite.identity import IGNORED_KEYS, config_diff, config_hash, normalize  # noqa: F401  (re-exported)
from clsuite.io import (
    FAILED_FILE,
    GRID_FILE,
    LOG_FILE,
    OVERRIDES_FILE,
    RESULTS_FILE,
    STALE_PREFIX,
    read_json,
    write_json_atomic,
)
from clsuite.locks import HOST, JobLock, holder_alive  # noqa: F401  (re-exported)

INDEX_DIR = ".index"
MAX_DIRNAME = 200  # a job folder name longer than this (file systems stop at 255 bytes) is hashed

# Set by SweepCallback.on_multirun_end in the process that launched the sweep (clsuite.cli reads it).
LAST_SUMMARY: dict | None = None


def _env_flag(name: str, default: bool = True) -> bool:
    v = os.environ.get(name)
    return default if v is None or v == "" else v.lower() not in ("0", "false", "no", "off")


def resume_mode(cfg: dict) -> str:
    """``strict`` (default), ``config_only`` or ``off``: the ``resume`` key, else ``$CLSUITE_RESUME``."""
    env = (os.environ.get("CLSUITE_RESUME") or "").lower()
    if env in ("0", "false", "no", "off"):
        return "off"
    if env in RESUME_MODES:
        return env
    return str(cfg.get("resume") or "strict")


def job_dirname(name: str) -> str:
    """The override dirname, or a prefix of it plus a hash when it is too long for a folder name."""
    if len(name.encode()) <= MAX_DIRNAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    prefix = name.encode()[: MAX_DIRNAME - 40].decode(errors="ignore").rsplit(",", 1)[0]
    return f"{prefix},hash={digest}"


# ----------------------------------------------------------------------------- the reuse index

SCANNED_FILE = "_scanned.json"  # in the index folder: results files already read, with their mtimes


def index_result(root, results_path, res: dict, config_key: str, experiment, overwrite: bool = True) -> bool:
    """Point the index entries of a finished result (its config hash and, when it has one, its
    identity key) at ``results_path``; ``overwrite=False`` keeps entries that exist. True when an
    entry was written. An unwritable index only costs reuse: errors are ignored."""
    root = Path(root)
    keys = [config_key] + ([str(res["identity"]["key"])[:20]] if (res.get("identity") or {}).get("key") else [])
    entry = {"path": os.path.relpath(Path(results_path).resolve(), root.resolve()), "experiment": experiment}
    wrote = False
    for key in keys:
        target = root / INDEX_DIR / f"{key}.json"
        if overwrite or not target.exists():
            with contextlib.suppress(OSError):
                write_json_atomic(target, entry)
                wrote = True
    return wrote


def reindex(root) -> int:
    """Index every finished results file under ``root/<experiment>/<job>/`` that has no index entry yet.

    A sweep indexes each result it finishes or skips (``Job.register``); results copied into
    ``multirun/`` from elsewhere were never registered, and a later experiment would retrain them
    instead of reusing them. Called once at the start of every sweep. The files already read are
    remembered with their mtime (``.index/_scanned.json``), so a rerun reads only new or changed
    ones. An existing entry is never overwritten; a file edited by hand (its seal broken) is not
    indexed. Returns how many results were newly indexed.
    """
    root = Path(root)
    scanned_path = root / INDEX_DIR / SCANNED_FILE
    scanned = read_json(scanned_path) or {}
    seen, added = {}, 0
    for path in sorted(root.glob(f"*/*/{RESULTS_FILE}")):  # .index/ holds files only: never matched
        rel = path.relative_to(root).as_posix()
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        seen[rel] = mtime
        if scanned.get(rel) == mtime:
            continue
        res = read_json(path)
        key = dotted_get(res or {}, "identity.key")
        if not key or res.get("status", "finished") != "finished" or not ident.seal_ok(res):
            continue
        cfg_key = config_hash(normalize(res.get("config", {})))
        added += index_result(root, path, res, cfg_key, path.parent.parent.name, overwrite=False)
    with contextlib.suppress(OSError):
        write_json_atomic(scanned_path, seen)
    return added


# ----------------------------------------------------------------------------- one job


class Job:
    """Lock / resume / reuse / failure bookkeeping of one multirun job (folder ``out_dir``)."""

    def __init__(self, cfg, out_dir, sweep_dir=None, overrides=(), job_num: int = 0):
        self.cfg = ident._container(cfg)
        self.out_dir = Path(out_dir)
        self.sweep_dir = Path(sweep_dir) if sweep_dir is not None else self.out_dir.parent
        self.overrides = list(overrides)
        self.job_num = int(job_num or 0)
        self.norm = normalize(self.cfg)
        self.hash = config_hash(self.norm)
        self.name = self.out_dir.name
        self.mode = resume_mode(self.cfg)
        self.identity: dict | None = None  # the identity this job's run will have (computed once)
        self.rerun_reasons: list[str] = []
        self.lock = JobLock(self.out_dir)

    # -- where things are
    @property
    def results_path(self) -> Path:
        return self.out_dir / RESULTS_FILE

    @property
    def failed_path(self) -> Path:
        return self.out_dir / FAILED_FILE

    def index_path(self, key: str | None = None) -> Path:
        if key is None:
            key = self.hash if self.mode == "config_only" else self.expected()["key"][:20]
        return self.sweep_dir.parent / INDEX_DIR / f"{key}.json"

    def expected(self) -> dict:
        if self.identity is None:
            self.identity = ident.expected(self.cfg)
        return self.identity

    # -- resume
    def mismatch(self, res: dict) -> list[tuple[str, str]]:
        """Why a finished result cannot stand for this job ([] when it can)."""
        if res.get("digest") is not None and not ident.seal_ok(res):
            return [("edited", "the results file was edited after it was written")]
        if self.mode == "config_only":
            old = normalize(res.get("config", {}))
            return [] if old == self.norm else [("config", "; ".join(config_diff(old, self.norm)[:3]))]
        if res.get("digest") is None and res.get("identity"):
            return [("edited", "the results file carries no digest")]
        return ident.differences(res.get("identity"), self.expected())

    def finished(self) -> tuple[dict, str] | None:
        """(results, "skipped" | "reused") when this job already has a result, else None."""
        if self.mode == "off":
            return None
        res = read_json(self.results_path)
        if res is not None and res.get("status", "finished") == "finished":
            why = self.mismatch(res)
            if not why:
                self.failed_path.unlink(missing_ok=True)
                self.register()
                return res, "skipped"
            self.rerun_reasons = sorted({r for r, _ in why})
            stale = self._stale_name()
            os.replace(self.results_path, stale)
            detail = "; ".join(f"{r} changed ({d})" if r in ident.REASONS[:6] else d for r, d in why)
            print(f"rerun {self.name}: {detail}; old results kept as {stale.name}", file=sys.stderr)
        if _env_flag("CLSUITE_REUSE"):
            entry = read_json(self.index_path())
            if entry:
                src = Path(entry["path"])
                src = src if src.is_absolute() else self.sweep_dir.parent / src
                res = read_json(src)
                if res is not None and src.resolve() != self.results_path.resolve() and not self.mismatch(res):
                    res["config"]["experiment"] = self.cfg.get("experiment")
                    res["reused_from"] = str(src)
                    write_json_atomic(self.results_path, ident.seal(res))
                    self.failed_path.unlink(missing_ok=True)
                    return res, "reused"
        return None

    def _stale_name(self) -> Path:
        n = 1
        while (p := self.out_dir / f"{STALE_PREFIX}{n}.json").exists():
            n += 1
        return p

    def register(self) -> None:
        """Index this job's finished result by identity key and config hash (for reuse elsewhere)."""
        res = read_json(self.results_path) or {}
        index_result(self.sweep_dir.parent, self.results_path, res, self.hash, self.cfg.get("experiment"))

    # -- outcome records
    def succeeded(self, wall_s: float) -> None:
        self.failed_path.unlink(missing_ok=True)
        self.register()
        self.log("ran", wall_s=wall_s, reasons=self.rerun_reasons)

    def failed(self, exc: BaseException, wall_s: float = 0.0, status: str = "failed") -> str:
        """Record a failure (``failed.json`` + a log line); never raises (a full disk: a warning)."""
        line = error_line(exc)
        try:
            prev = read_json(self.failed_path) or {}
            record = {
                "status": status,
                "error": line,
                "attempt": int(prev.get("attempt", 0)) + 1,
                "time": dt.datetime.now().isoformat(timespec="seconds"),
                "host": HOST,
                "overrides": self.overrides,
                "benchmark": dotted_get(self.cfg, "benchmark.name"),
                "method": dotted_get(self.cfg, "method.name"),
                "memory": self.cfg.get("memory"),
                "seed": self.cfg.get("seed"),
                "traceback": "".join(traceback.format_exception(exc)),
                "config": self.cfg,
            }
            write_json_atomic(self.failed_path, record)
        except Exception as e:  # (the record is lost; the sweep goes on)
            print(f"warning: {self.name}: could not write {FAILED_FILE}: {error_line(e)}", file=sys.stderr)
        self.log(status, wall_s=wall_s, error=line, reasons=self.rerun_reasons)
        return line

    def log(self, status: str, **extra) -> None:
        rec = {"time": time.time(), "sweep_id": os.environ.get("CLSUITE_SWEEP_ID"), "job": self.name, "status": status}
        rec.update({k: v for k, v in extra.items() if v not in (None, [])})
        try:
            self.sweep_dir.mkdir(parents=True, exist_ok=True)
            with open(self.sweep_dir / LOG_FILE, "a") as f:  # one short line per write: O_APPEND keeps lines whole
                f.write(json.dumps(rec, default=str) + "\n")
        except OSError:
            pass
        from clsuite.progress import sweep_progress  # "k/N done, F failed, about T left", as jobs finish

        if status != "busy" and (line := sweep_progress(self.sweep_dir)):
            print(line, file=sys.stderr)

    def write_overrides(self) -> None:
        """A hashed folder name: the overrides it stands for, written inside."""
        if self.name.rsplit(",", 1)[-1].startswith("hash="):
            with contextlib.suppress(OSError):
                write_json_atomic(self.out_dir / OVERRIDES_FILE, self.overrides)


def error_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


# ----------------------------------------------------------------------------- GPUs


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # (a broken CUDA install means: no GPU)
        return 0


def jobs_per_gpu() -> int:
    return max(1, int(os.environ.get("CLSUITE_JOBS_PER_GPU", "1")))


cpu_count = ident.cpu_count


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


RUN_ID = uuid.uuid4().hex[:6]  # this process's run: the last part of a single run's folder name


def _register_resolvers() -> None:
    """``${clsuite_n_jobs:}`` (launcher=joblib), ``${clsuite_run_id:}`` (hydra.run.dir: two runs
    started in the same second get two folders) and ``${clsuite_dirname:...}`` (hydra.sweep.subdir)."""
    for name, fn in (
        ("clsuite_n_jobs", n_parallel_jobs),
        ("clsuite_run_id", lambda: RUN_ID),
        ("clsuite_dirname", job_dirname),
    ):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn, use_cache=name == "clsuite_run_id")


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
        name = job_dirname(get_overrides_dirname(parsed, list(od.exclude_keys), od.item_sep, od.kv_sep))
        out.append({"overrides": list(job), "dir": name if subdir_is_dirname else None})
    return out


def unknown_options(jobs: list[dict], extra_dirs=()) -> list[str]:
    """One error line per config group with an option in the grid that has no yaml file (in conf/
    or in ``extra_dirs``, the other file directories on Hydra's search path)."""
    bad: dict[str, list[str]] = {}
    for job in jobs:
        for o in job["overrides"]:
            key, _, value = o.partition("=")
            if msg := unknown_option(key, value, extra_dirs):
                bad.setdefault(key.lstrip("+~"), []).append(msg)
    return [msgs[0].replace("; valid", " in the sweep; valid", 1) for _, msgs in sorted(bad.items())]


def validate_grid(config: DictConfig, jobs: list[dict]) -> None:
    """Compose and validate every job of the sweep (``ConfigError`` names the first bad job).

    Hydra composes once per distinct set of group choices (``benchmark=``, ``method=``, Hydra
    keys, deletions); each job's plain values (seed, memory, tau, ...) are then set on a copy,
    which must name existing keys unless added with ``+``, and the copy is validated.
    """
    import copy

    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import open_dict

    from clsuite.config import GROUPS, check_overrides, validate

    n_jobs = config.hydra.launcher.get("n_jobs")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1):
        raise ConfigError(f"hydra.launcher.n_jobs must be a whole number >= 1 (or -1: one per core), got {n_jobs!r}")
    name = config.hydra.job.config_name
    parser = OverridesParser.create()
    bases: dict[tuple, DictConfig] = {}
    missing = object()
    for job in jobs:
        where = f"job {job.get('dir') or ' '.join(job['overrides'])}"
        check_overrides(job["overrides"])
        try:
            composed, plain = [], []
            for text, o in zip(job["overrides"], parser.parse_overrides(job["overrides"])):
                key = o.key_or_group
                if key in GROUPS or key.startswith("hydra") or o.is_delete() or o.package is not None or "/" in key:
                    composed.append(text)
                else:
                    plain.append((key, o.value(), o.is_add() or o.is_force_add()))
            if tuple(composed) not in bases:
                bases[tuple(composed)] = compose(config_name=name, overrides=composed)
            cfg = copy.deepcopy(bases[tuple(composed)])
            with open_dict(cfg):
                for key, value, add in plain:
                    if not add and OmegaConf.select(cfg, key, default=missing) is missing:
                        raise ConfigError(f"unknown key {key!r}")
                    OmegaConf.update(cfg, key, value, merge=True, force_add=add)
        except ConfigError as e:
            raise ConfigError(f"{e} ({where})") from None
        except Exception as e:  # a composition error (a bad value type, a missing file)
            raise ConfigError(f"{where} does not compose: {error_line(e)}") from None
        try:
            validate(cfg)
        except ConfigError as e:
            raise ConfigError(f"{e} ({where})") from None


def summarize(sweep_dir, sweep_id: str | None = None, grid: list[dict] | None = None) -> dict:
    """Counts of ran / skipped / reused / busy / interrupted / failed jobs of one sweep invocation,
    and why jobs reran (``reruns``: {reason: count})."""
    sweep_dir = Path(sweep_dir)
    counts = {"ran": 0, "skipped": 0, "reused": 0, "busy": 0, "interrupted": 0, "failed": 0}
    failed: list[str] = []
    reasons: dict[str, int] = {}
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
            for r in rec.get("reasons") or ():
                reasons[r] = reasons.get(r, 0) + 1
            if rec["status"] in ("failed", "interrupted"):
                failed.append(f"{rec['job']}: {rec.get('error', '')}")
    out = {**counts, "reruns": reasons, "failed_jobs": failed, "sweep_dir": str(sweep_dir)}
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
        os.environ["CLSUITE_SWEEP_PID"] = str(os.getpid())  # joblib workers stop when this process is gone
        sweeper = str(config.hydra.sweeper.get("_target_", ""))
        if not sweeper.endswith("BasicSweeper"):
            return
        try:
            grid = expand_grid(config)
        except Exception as e:  # (glob() sweeps and the like: no grid file)
            print(f"warning: could not expand the sweep grid ({error_line(e)}); no grid.json", file=sys.stderr)
            return
        sources = config.hydra.runtime.get("config_sources") or []
        errors = unknown_options(grid, [s.path for s in sources if s.get("schema") == "file"])
        try:
            if errors:
                raise ConfigError(errors[0])
            validate_grid(config, grid)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
        self.grid = grid  # every job composed and validated: only now is the grid the sweep's
        sweep_dir = Path(str(config.hydra.sweep.dir))
        write_json_atomic(
            sweep_dir / GRID_FILE,
            {
                "experiment": config.get("experiment"),
                "sweep_id": sweep_id,
                "created": dt.datetime.now().isoformat(timespec="seconds"),
                "host": HOST,
                "argv": sys.argv,
                "launcher": str(config.hydra.launcher.get("_target_", "")),
                "n_jobs": len(grid),
                "jobs": grid,
            },
        )
        print(f"sweep {config.get('experiment')}: {len(grid)} jobs -> {sweep_dir}/", file=sys.stderr)
        if _env_flag("CLSUITE_REUSE"):
            n = reindex(sweep_dir.parent)
            if n:
                print(f"sweep {config.get('experiment')}: indexed {n} earlier results for reuse", file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        global LAST_SUMMARY
        s = summarize(str(config.hydra.sweep.dir), os.environ.get("CLSUITE_SWEEP_ID"), self.grid)
        LAST_SUMMARY = s
        exp = config.get("experiment")
        msg = (
            f"sweep {exp}: {s['ran']} ran, {s['skipped']} skipped (results match), {s['reused']} reused "
            f"(same identity in another experiment), {s['busy']} busy (running elsewhere), "
            f"{s['interrupted']} interrupted, {s['failed']} failed"
        )
        if "expected" in s:
            msg += f"; {s['finished_total']}/{s['expected']} of the grid have results"
        print(msg, file=sys.stderr)
        if s["reruns"]:
            why = ", ".join(
                f"{r} changed: {n}" if r in ident.REASONS[:6] else f"{r}: {n}" for r, n in sorted(s["reruns"].items())
            )
            print(f"  reran because {why}", file=sys.stderr)
        for line in s["failed_jobs"][:20]:
            print(f"  failed: {line}", file=sys.stderr)
        from clsuite.commands import hint

        print(f"  tables and figures: {hint('aggregate', str(exp))}", file=sys.stderr)
        from clsuite.wandb_sync import log_sweep_charts  # logger=wandb: the experiment's W&B charts

        log_sweep_charts(config)
