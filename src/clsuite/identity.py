"""A run's identity: everything that can move its numbers, hashed into one key.

A result may be skipped on a rerun, or copied into another experiment, only when the run that
made it had the same identity as the run that would replace it (``clsuite.sweep.Job``):

1. **config**: the resolved config without :data:`IGNORED_KEYS` (where the run is logged, how it
   is launched, where the data files live, ...), without ``hydra`` and without null values
   (:func:`normalize`);
2. **code**: the git commit and a hash of the uncommitted changes under ``src/`` and ``conf/``
   (``git diff HEAD`` plus the untracked files there); outside a git checkout (an installed
   wheel) the package version and a hash of the package's own ``.py`` and ``.yaml`` files;
3. **data**: the md5 of every data file the run reads (the digests ``clsuite.data.files`` computes
   for its own check, memoised: no file is hashed twice in a process);
4. **env**: the torch and BLAS thread counts (both pinned by :func:`pin_threads` inside every job,
   whatever the launcher: 1 vs 2 threads moves Acc by up to 3 points), the device type and the
   torch version.

``key`` = sha256 of the canonical JSON of the four parts. :func:`differences` names the parts
that differ between two identities (config / code / data / threads / device / torch), which the
sweep summary counts. A results file is also *sealed*: ``digest`` = sha256 of its own canonical
JSON, so a hand edit is detected (:func:`seal_ok`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import os
import subprocess
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

# Keys of the resolved config that cannot change a run's result. The folder names of sweep jobs
# leave out the same keys (conf/config.yaml hydra.job.config.override_dirname.exclude_keys;
# tests/test_sweeps.py checks that the two lists agree). Threads and the device are not config
# identity: what the run actually used is in the env part.
IGNORED_KEYS = (
    "experiment",
    "resume",
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

ROOT = Path(__file__).resolve().parents[2]  # the repository (src/clsuite/ -> ..), when run from a checkout


# ----------------------------------------------------------------------------- 1. config


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

    A key added to the configs later with a null default leaves the identity of the runs made
    before it unchanged: absent and null compare equal.
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


def canonical(obj) -> str:
    """One JSON text per value: sorted keys, no spaces, keys as strings (a JSON round trip first)."""
    plain = json.loads(json.dumps(obj, default=str, allow_nan=True))
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), allow_nan=True)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def config_hash(cfg) -> str:
    return sha256(canonical(normalize(cfg)))[:20]


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


# ----------------------------------------------------------------------------- 2. code


def _git(*args: str) -> bytes | None:
    try:
        p = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


@functools.cache
def code_identity() -> dict:
    """``{"commit", "dirty_hash"}`` of the code this process runs (computed once per process)."""
    package = Path(__file__).resolve().parent
    commit = _git("rev-parse", "HEAD") if (ROOT / ".git").exists() and (ROOT / "conf").is_dir() else None
    if commit is not None:
        h = hashlib.sha256()
        diff = _git("diff", "--no-color", "--no-ext-diff", "--binary", "HEAD", "--", "src", "conf") or b""
        h.update(diff)
        untracked = _git("ls-files", "--others", "--exclude-standard", "-z", "--", "src", "conf") or b""
        for name in sorted(n for n in untracked.decode().split("\0") if n):
            h.update(name.encode() + b"\0")
            with contextlib.suppress(OSError):
                h.update((ROOT / name).read_bytes())
        dirty = bool(diff or untracked)
        return {"commit": commit.decode().strip(), "dirty_hash": h.hexdigest()[:16] if dirty else None}
    # an installed package: no git; its version and the hash of its own source and config files
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("clsuite")
    except PackageNotFoundError:
        ver = None
    h = hashlib.sha256()
    for p in sorted(package.rglob("*")):
        if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(package)).encode() + b"\0" + p.read_bytes())
    return {"commit": None, "version": ver, "dirty_hash": h.hexdigest()[:16]}


# ----------------------------------------------------------------------------- 3. data


def data_identity(cfg) -> dict:
    """``{"files": {relative name: md5}}`` of the files the run reads (none for synthetic data)."""
    from clsuite.data.files import file_md5, source_files

    c = _container(cfg)
    root = Path(str(c["data"]["root"]))
    files = {}
    for rel in source_files(c["benchmark"]["source"]):
        path = root / rel
        files[rel] = file_md5(path) if path.is_file() else None
    return {"files": files}


# ----------------------------------------------------------------------------- 4. env


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def threads_of(cfg) -> int:
    """The thread count a run uses: ``trainer.threads``, or every core of this process when null."""
    c = _container(cfg)
    n = (c.get("trainer") or {}).get("threads")
    return int(n) if n is not None else cpu_count()


def pin_threads(n: int) -> int:
    """Set torch's intra-op threads and every BLAS / OpenMP pool of the process to ``n``.

    Done inside every job (single run, basic, joblib, submitit): loky caps a worker's pools at
    cores / n_jobs, while a basic-launcher job inherits them all (GEM's numpy products then used
    every core), so without this the launcher moved the numbers.
    """
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(int(n))
    threadpool_limits(limits=int(n))
    return int(n)


def blas_threads() -> int | list[int] | None:
    from threadpoolctl import threadpool_info

    counts = sorted({int(i["num_threads"]) for i in threadpool_info() if i.get("user_api") == "blas"})
    if not counts:
        return None
    return counts[0] if len(counts) == 1 else counts


def device_type(cfg) -> str:
    """``cpu`` or ``cuda``: what ``clsuite.experiment.pick_device`` will choose for this config."""
    import torch

    acc = str((_container(cfg).get("trainer") or {}).get("accelerator", "auto"))
    if acc == "cpu" or (acc == "auto" and not torch.cuda.is_available()):
        return "cpu"
    return "cuda"


def env_identity(device: str) -> dict:
    """What this process runs with now (call after :func:`pin_threads`)."""
    import torch

    return {
        "torch_threads": torch.get_num_threads(),
        "blas_threads": blas_threads(),
        "device_type": str(device),
        "torch": torch.__version__,
    }


# ----------------------------------------------------------------------------- the whole


def identity(cfg, device: str | None = None) -> dict:
    """The identity of a run of ``cfg`` in this process (threads must be pinned already)."""
    parts = {
        "config": normalize(cfg),
        "code": code_identity(),
        "data": data_identity(cfg),
        "env": env_identity(device or device_type(cfg)),
    }
    return {"key": sha256(canonical(parts)), **parts}


def expected(cfg) -> dict:
    """The identity a run of ``cfg`` started now in this process would have: pins the threads."""
    pin_threads(threads_of(cfg))
    return identity(cfg)


def _short(code: dict) -> str:
    return f"{(code.get('commit') or code.get('version') or '?')[:10]}+{code.get('dirty_hash') or 'clean'}"


REASONS = ("config", "code", "data", "threads", "device", "torch", "no identity", "edited")


def differences(old: dict | None, new: dict) -> list[tuple[str, str]]:
    """``[(reason, detail), ...]``: why a result of identity ``old`` cannot stand for ``new``."""
    if not old or "key" not in old:
        return [("no identity", "the results file records no identity (made before identities)")]
    if old["key"] == new["key"]:
        return []
    out = []
    if old.get("config") != new["config"]:
        out.append(("config", "; ".join(config_diff(old.get("config") or {}, new["config"])[:3])))
    if old.get("code") != new["code"]:
        a, b = old.get("code") or {}, new["code"]
        what = "commit" if a.get("commit") != b.get("commit") else "uncommitted changes"
        out.append(("code", f"{what}: {_short(a)} -> {_short(b)}"))
    if old.get("data") != new["data"]:
        fa, fb = (old.get("data") or {}).get("files", {}), new["data"]["files"]
        changed = sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))
        out.append(("data", f"files differ: {', '.join(changed[:3])}"))
    ea, eb = old.get("env") or {}, new["env"]
    for reason, keys in (
        ("threads", ("torch_threads", "blas_threads")),
        ("device", ("device_type",)),
        ("torch", ("torch",)),
    ):
        diff = [f"{k} {ea.get(k)} -> {eb.get(k)}" for k in keys if ea.get(k) != eb.get(k)]
        if diff:
            out.append((reason, ", ".join(diff)))
    return out or [("edited", "the identity's key does not match its parts")]


# ----------------------------------------------------------------------------- the seal


def _payload(results: dict) -> dict:
    return {k: v for k, v in results.items() if k != "digest"}


def seal(results: dict) -> dict:
    """Add ``digest``: sha256 of the results' canonical JSON (everything but the digest)."""
    results["digest"] = sha256(canonical(_payload(results)))
    return results


def seal_ok(results: dict) -> bool:
    """False when the file was edited after it was written (or carries no digest)."""
    return results.get("digest") == sha256(canonical(_payload(results)))
