"""A run's identity: everything that can move its numbers (config, code, data, environment), hashed into
one key that decides resume, reuse and skip (docs/GUIDE.md, "Identity": Outside code too).
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
import sys
from pathlib import Path

from clsuite.config.home import CONF_DIR, cpu_count
from clsuite.core.errors import ConfigError
from clsuite.run.io import canonical, sha256  # noqa: F401  (re-exported)
from clsuite.run.results import (  # noqa: F401  (re-exported: the config part and the seal live with the results file)
    IGNORED_KEYS,
    _container,
    config_hash,
    key_of,
    normalize,
    seal,
    seal_ok,
)

ROOT = Path(__file__).resolve().parents[3]  # the repository (src/clsuite/run/ -> ../..), when run from a checkout


# ----------------------------------------------------------------------------- 1. config


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

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # clsuite/ (src/clsuite in a checkout)
CODE_SUFFIXES = (".py", ".yaml")
NOT_RUN = ("analysis",)  # sub-packages a training run never imports (tests/lab/test_identity.py checks it)
PACKAGED_SWEEPS = "sweeps"  # clsuite/sweeps/ of a wheel (pyproject force-include): configs, not code


def _tree(top: Path, prefix: str) -> dict[str, Path]:
    """``{prefix/relative name: path}`` of every ``.py`` / ``.yaml`` file under ``top`` (no caches)."""
    return {
        f"{prefix}/{p.relative_to(top).as_posix()}": p
        for p in top.rglob("*")
        if p.suffix in CODE_SUFFIXES
        and not any(q == "__pycache__" or q.startswith(".") for q in p.relative_to(top).parts)
        and p.is_file()
    }


def code_files(package_dir, conf_dir) -> dict[str, Path]:
    """``{relative name: path}`` of the files :func:`code_hash` reads: ``clsuite/<rel>`` under
    ``package_dir`` less :data:`NOT_RUN`, the paper sweeps a wheel carries (:data:`PACKAGED_SWEEPS`:
    configs, in the config part) and ``conf_dir`` when it lies inside (a wheel); ``conf/<rel>``
    under ``conf_dir``. A checkout and a wheel of the same files give the same names."""
    package_dir, conf_dir = Path(package_dir).resolve(), Path(conf_dir).resolve()
    own = {
        name: p
        for name, p in _tree(package_dir, package_dir.name).items()
        if p.relative_to(package_dir).parts[0] not in (*NOT_RUN, PACKAGED_SWEEPS) and not p.is_relative_to(conf_dir)
    }
    return {**own, **_tree(conf_dir, "conf")}


def code_hash(package_dir, conf_dir) -> str:
    """:func:`_files_hash` of :func:`code_files`: the content, not the commit (docs/GUIDE.md, "Identity")."""
    return _files_hash(code_files(package_dir, conf_dir))


def _files_hash(files: dict[str, Path], imports: set[str] | None = None) -> str:
    """First 16 hex digits of the sha256 of the sorted (name, length, bytes) of ``files``; the
    top-level modules their ``.py`` files import are added to ``imports`` (:func:`_imports`)."""
    h = hashlib.sha256()
    for name, path in sorted(files.items()):
        data = path.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode() + data)
        if imports is not None and name.endswith(".py"):
            imports |= _imports(data)
    return h.hexdigest()[:16]


@functools.cache
def code_identity() -> dict:
    """``{"hash"}``: :func:`code_hash` of the package and configs this process runs (once per process)."""
    return {"hash": code_hash(PACKAGE_DIR, CONF_DIR)}


def outside_modules(config: dict) -> list[str]:
    """The top-level modules, other than ``clsuite``, of every ``_target_`` in ``config`` (a
    normalised config: :func:`normalize`) and of a ``benchmark.source`` written ``module:name``."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "_target_" and isinstance(v, str) and "." in v:
                    found.add(v.split(".")[0])
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(config)
    module = str((config.get("benchmark") or {}).get("source", "")).rpartition(":")[0]
    if module:
        found.add(module.split(".")[0])
    return sorted(found - {PACKAGE_DIR.name})


@functools.cache
def _library_roots() -> tuple[Path, ...]:
    """Where the standard library and installed distributions live (site-packages, the user's too)."""
    import site
    import sysconfig

    roots = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])}
    return tuple(Path(r).resolve() for r in roots if r)


def _located(name: str) -> dict[str, Path] | str:
    """The top-level module ``name`` as this process imports it (found without running any code):
    outside code as ``{relative name: path}``: its file (``name.py``, or a compiled module), every
    ``.py`` / ``.yaml`` of its package (names relative to the package, as :func:`code_hash`), of every
    portion of a namespace package (the first portion's file where two share a name, as the import
    does); else ``library`` (the standard library, an installed distribution) or ``not found``."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)  # a top-level name: nothing is imported to find it
    except (ImportError, ValueError):  # (ValueError: a module without a spec, e.g. __main__)
        spec = None
    if spec is None:
        return "not found"
    if spec.origin and Path(spec.origin).is_file():  # a module's file, a regular package's __init__.py
        origin = Path(spec.origin).resolve()
        where = [origin.parent] if spec.submodule_search_locations else [origin]
    else:  # a namespace package: its portions (folders); or a module built into the interpreter
        origin, where = None, [Path(p).resolve() for p in spec.submodule_search_locations or ()]
        if not where:
            return "library" if spec.origin in ("built-in", "frozen") else "not found"
    where = [w for w in where if not any(w.is_relative_to(r) for r in _library_roots())]
    if not where:
        return "library"
    if origin is not None and not spec.submodule_search_locations:
        return {f"{name}{origin.suffix}": origin}
    files: dict[str, Path] = {}
    for portion in where:
        for rel, path in _tree(portion, name).items():
            files.setdefault(rel, path)
    return files


@functools.lru_cache(maxsize=1024)
def _imports(source: bytes) -> frozenset[str]:
    """The top-level modules a Python file imports by name: every ``import`` statement, function
    bodies included (an import at train time), and ``import_module`` / ``__import__`` of a literal
    name; a relative import stays inside the file's own package. Unparsable: none (the import fails)."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if func in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return frozenset(n.split(".")[0] for n in names if n and not n.startswith("."))


def _outside_now(config: dict) -> tuple[dict[str, str], set[str]]:
    """(``{module: hash, or what it is}``, the modules that are outside code): :func:`outside_code`
    as the files on disk are now."""
    named = outside_modules(config)
    found: dict[str, str] = {}
    code: set[str] = set()
    queue, seen = list(named), {PACKAGE_DIR.name}
    while queue:
        if (name := queue.pop()) in seen:
            continue
        seen.add(name)
        where = _located(name)
        if isinstance(where, dict):
            imported: set[str] = set()
            found[name] = _files_hash(where, imported)
            code.add(name)
            queue += sorted(imported - seen)
        elif name in named:  # a library the config names: its version (torch's, imported by any: env)
            found[name] = _library(name) if where == "library" else where
    return dict(sorted(found.items())), code


def _library(name: str) -> str:
    from importlib.metadata import packages_distributions, version

    dist = (packages_distributions().get(name) or [None])[0]
    return f"{dist} {version(dist)}" if dist else "installed"


# Outside module -> its hash as this process read it, before importing it. Process state on purpose, as
# sys.modules is: the hash is read before the module object exists and must last as long as the import,
# beyond every object the suite owns in a process (a joblib worker runs job after job, each with its own
# clsuite.cli.Invocation, in one interpreter whose imports they share).
_HELD: dict[str, str] = {}


def outside_code(config: dict) -> dict[str, str]:
    """``{module: hash}`` of the code outside the package a run of ``config`` imports: every
    top-level module its config names (:func:`outside_modules`) and, transitively, every one that
    their files import (:func:`_imports`) which is neither the standard library nor an installed
    distribution; a library the config names: ``<distribution> <version>``. A module that this
    process imported with other content than its file holds now is a ``ConfigError``: the process
    would run the old code under the new code's identity (docs/GUIDE.md, "Identity")."""
    found, code = _outside_now(config)
    for name in sorted(code):
        if name in sys.modules and _HELD.get(name, found[name]) != found[name]:
            raise ConfigError(
                f"outside code {name} changed on disk ({_HELD[name]} -> {found[name]}) after this process imported "
                "it: the process runs the old code; start a new process (rerun the command) to run the new one"
            )
        _HELD[name] = found[name]
    return found


class CodeChanged(RuntimeError):
    """Outside code edited while a run ran (a run failure, exit 1: no results file is written)."""


def check_unchanged(ident: dict) -> None:
    """At the end of a run: :class:`CodeChanged` when the outside code on disk is not the code its identity
    recorded at its start (edited while it ran: a module imported during the run may be either
    version); the run then writes no results."""
    was = (ident.get("code") or {}).get("outside") or {}
    now = _outside_now(ident["config"])[0]
    if now != was:
        changed = sorted(m for m in set(was) | set(now) if was.get(m) != now.get(m))
        raise CodeChanged(
            "outside code changed on disk while the run ran ("
            + ", ".join(f"{m} {was.get(m, '-')} -> {now.get(m, '-')}" for m in changed)
            + "): a module imported during the run may be either version; no results written; rerun it"
        )


def code_part(config: dict) -> dict:
    """The identity's code part: :func:`code_identity`, plus ``outside`` when the config names code
    from outside the package (a stock run's part is exactly ``{"hash"}``)."""
    outside = outside_code(config)
    return {**code_identity(), **({"outside": outside} if outside else {})}


def _git(*args: str) -> bytes | None:
    try:
        p = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


@functools.cache
def provenance() -> dict:
    """``{"commit", "dirty", "version"}``: where the code came from, beside the key (docs/GUIDE.md,
    "Identity"); commit and dirty ``None`` outside a git checkout, version when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("clsuite")
    except PackageNotFoundError:
        ver = None
    commit = dirty = None
    if (ROOT / ".git").exists() and (ROOT / "conf").is_dir():
        head = _git("rev-parse", "HEAD")
        if head is not None:
            commit = head.decode().strip()
            changes = _git("status", "--porcelain", "--untracked-files=all", "--", "src", "conf")
            dirty = None if changes is None else bool(changes.strip())
    return {"commit": commit, "dirty": dirty, "version": ver}


# ----------------------------------------------------------------------------- 3. data


def data_identity(cfg, source) -> dict:
    """``{"files": {relative name: md5}}`` of the files the run reads (none for synthetic data: the bound
    ``source``'s :meth:`~clsuite.core.data.sources.Source.digests`); ``"decoder"`` too where the source
    names one, and ``"decoded"``, the sha256 of the arrays as read, where it keeps them between runs (a
    cache). ``source``: the run's bound source (``clsuite.core.data.sources.bind``)."""
    d = _container(cfg)["data"]
    root = Path(str(d["root"]))
    decoded = source.decoded_sha256(root, bool(d.get("download")), bool(d.get("verify_md5", True)), d.get("cache_dir"))
    return {
        "files": source.digests(root),
        **({"decoder": source.decoder()} if source.decoder else {}),
        **({"decoded": decoded} if decoded else {}),
    }


# ----------------------------------------------------------------------------- 4. env


def _trainer(cfg) -> dict:
    return _container(cfg).get("trainer") or {}


def threads_of(cfg) -> int:
    """The thread count a run uses: ``trainer.threads``, or every core of this process when null."""
    n = _trainer(cfg).get("threads")
    return int(n) if n is not None else cpu_count()


def pin_threads(n: int) -> int:
    """Set torch's intra-op threads and every BLAS / OpenMP pool of the process to ``n``, inside
    every job: loky caps a worker's pools at cores / n_jobs, a basic-launcher job inherits them all
    (docs/GUIDE.md, "Threads")."""
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
    """``cpu`` or ``cuda``: what ``clsuite.core.train.pick_device`` will choose for this config."""
    import torch

    acc = str(_trainer(cfg).get("accelerator", "auto"))
    return "cpu" if acc == "cpu" or (acc == "auto" and not torch.cuda.is_available()) else "cuda"


def numerics_of(cfg) -> str:
    """``trainer.numerics`` of a config (``native`` when absent: configs from before the key)."""
    return str(_trainer(cfg).get("numerics") or "native")


def env_identity(device: str, numerics: str = "native", deterministic: bool = False) -> dict:
    """What this process runs with now (call after :func:`pin_threads` and ``clsuite.config.numerics.apply``):
    ``numerics`` holds the kernels in effect and, when any is set, the kernel variables of the
    environment that can act on the run (``variables``: ``clsuite.config.numerics.variables``)."""
    import torch

    from clsuite.config.numerics import in_effect, variables

    found = variables(numerics, device, deterministic)
    return {
        "torch_threads": torch.get_num_threads(),
        "blas_threads": blas_threads(),
        "device_type": str(device),
        "torch": torch.__version__,
        "numerics": {**in_effect(numerics), **({"variables": found} if found else {})},
    }


# ----------------------------------------------------------------------------- the whole


def identity(cfg, device: str | None, source) -> dict:
    """The identity of a run of ``cfg`` in this process (threads must be pinned already) on ``device``
    (a type; None: the config's); ``source``: the run's bound source (:func:`data_identity`)."""
    config = normalize(cfg)
    deterministic = bool((config.get("trainer") or {}).get("deterministic"))
    parts = {
        "config": config,
        "code": code_part(config),
        "data": data_identity(cfg, source),
        "env": env_identity(device or device_type(cfg), numerics_of(cfg), deterministic),
    }
    return {"key": key_of(parts), **parts, "provenance": provenance()}


def expected(cfg, source) -> dict:
    """The identity a run of ``cfg`` started now in this process would have: pins the threads and
    the kernels (``clsuite.config.numerics.apply``), as the run will; ``source``: as :func:`identity`."""
    from clsuite.config.numerics import apply

    apply(numerics_of(cfg))
    pin_threads(threads_of(cfg))
    return identity(cfg, None, source)


def made_by(ident: dict) -> str:
    """Where the code of an identity came from: ``commit abc1234567[+dirty]``, ``version 0.2.0``, ``unknown``
    (its provenance, or the code part of an identity made before content hashes: ``commit``, ``dirty_hash``)."""
    if "provenance" in ident:
        prov = ident["provenance"] or {}
        dirty = prov.get("dirty")
    else:  # the old layout: dirty_hash was also set for an installed package (a hash of its files)
        prov = ident.get("code") or {}
        dirty = prov.get("dirty_hash")
    if prov.get("commit"):
        return f"commit {str(prov['commit'])[:10]}" + ("+dirty" if dirty else "")
    return f"version {prov['version']}" if prov.get("version") else "unknown"


def _code_change(old: dict, new: dict) -> str:
    a, b = old.get("code") or {}, new["code"]
    if "hash" not in a:  # a results file from before content hashes: its code cannot be compared
        return f"made by {made_by(old)} before content hashes; now {b.get('hash')} ({made_by(new)})"
    if a.get("hash") == b.get("hash"):  # the package is the same: the code outside it differs
        oa, ob = a.get("outside") or {}, b.get("outside") or {}
        changed = sorted(m for m in set(oa) | set(ob) if oa.get(m) != ob.get(m))
        return "code outside the package: " + ", ".join(f"{m} {oa.get(m, '-')} -> {ob.get(m, '-')}" for m in changed)
    return f"code hash {a['hash']} -> {b.get('hash')} ({made_by(old)} -> {made_by(new)})"


CHANGES = ("config", "code", "data", "threads", "device", "torch", "numerics")  # a reason that is one part changed
REASONS = (*CHANGES, "no identity", "edited", "malformed")


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
        out.append(("code", _code_change(old, new)))
    if old.get("data") != new["data"]:
        da, db = old.get("data") or {}, new["data"]
        fa, fb = da.get("files", {}), db["files"]
        changed = sorted(k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k))
        extra = [f"{k} differs" for k in ("decoder", "decoded") if da.get(k) != db.get(k)]
        out.append(("data", "; ".join([f"files differ: {', '.join(changed[:3])}"] * bool(changed) + extra)))
    ea, eb = old.get("env") or {}, new["env"]
    for reason, keys in (
        ("threads", ("torch_threads", "blas_threads")),
        ("device", ("device_type",)),
        ("torch", ("torch",)),
        ("numerics", ("numerics",)),
    ):
        diff = [f"{k} {ea.get(k)} -> {eb.get(k)}" for k in keys if ea.get(k) != eb.get(k)]
        if diff:
            out.append((reason, ", ".join(diff)))
    return out or [("edited", "the identity's key does not match its parts")]
