"""Where the suite lives and runs: its folders (``CONF_DIR``, ``SWEEPS_DIR``: the packaged copies in a
wheel, ``conf/`` and ``sweeps/`` in a checkout), the datasets' folder, the command line that works here,
the cores and GPUs. A leaf: no ``clsuite`` import (docs/DEVELOPING.md, "Layers, bottom up").
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[3]  # the repository root when this file is src/clsuite/config/home.py


def _data_dir(name: str) -> Path:
    packaged = Path(__file__).resolve().parents[1] / name  # pip install . (hatch force-include)
    return packaged if packaged.is_dir() else CHECKOUT / name


CONF_DIR = _data_dir("conf")
SWEEPS_DIR = _data_dir("sweeps")  # the paper sweeps (clsuite.paper): sweeps/ or the package's copy
SCRIPTS = {"wandb": "wandb_sync.py"}  # a checkout's scripts/
SHARED_DATA = os.path.join("..", "shared", "datasets")  # the datasets beside a clone (README.md, Quick start)
OWN_DATA = "data"  # where data.download=true fetches them (make run, without SHARED_DATA)


def data_dir() -> str:
    """The datasets' folder, the one rule of ``data.root``'s default (``${clsuite_data_dir:}``) and the
    Makefile's ``DATA_DIR``: ``$DATA_DIR``, else :data:`SHARED_DATA` when that folder exists, else
    :data:`OWN_DATA`; relative to the working directory. Where the data is found never changes a run's
    identity (``clsuite.run.identity``: the files' names under the folder and their md5)."""
    return os.environ.get("DATA_DIR") or (SHARED_DATA if os.path.isdir(SHARED_DATA) else OWN_DATA)


def in_checkout() -> bool:
    """This package is ``<repository>/src/clsuite`` (not an installed copy)."""
    return (CHECKOUT / "src" / "run.py").is_file() and (CHECKOUT / "conf").is_dir()


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


_FOR_READERS: list[bool] = []  # inside for_readers(): hint() gives the installed form


@contextlib.contextmanager
def for_readers():
    """Inside, :func:`hint` gives ``clsuite <verb> ...``, whatever runs now: the form of a page read on
    other machines (docs/REPRODUCTION.md), which must not depend on where it was built."""
    _FOR_READERS.append(True)
    try:
        yield
    finally:
        _FOR_READERS.pop()


def hint(verb: str, *args: str) -> str:
    """The command line of ``verb`` that works here, with the interpreter running now (a bare ``python``
    may lack the suite's dependencies); its three forms: README.md, "The main commands"."""
    if _FOR_READERS:
        return shlex.join(["clsuite", verb, *args])
    python = _shown(Path(sys.executable))
    if in_checkout():
        script = CHECKOUT / "scripts" / SCRIPTS[verb] if verb in SCRIPTS else CHECKOUT / "src" / "run.py"
        return shlex.join([python, _shown(script), *([] if verb in SCRIPTS else [verb]), *args])
    console = shutil.which("clsuite")
    if console and Path(console).absolute().parent == Path(sys.executable).absolute().parent:
        return shlex.join(["clsuite", verb, *args])
    return shlex.join([python, "-m", "clsuite", verb, *args])


def child_env() -> dict[str, str]:
    """The environment of a ``python -m clsuite`` child process that imports this very clsuite (this
    package's parent folder first on ``PYTHONPATH``), whether it is a checkout or an installed copy."""
    path = (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # (a broken CUDA install means: no GPU)
        return 0


def n_parallel_jobs() -> int:
    """Default joblib ``n_jobs`` (``${clsuite_n_jobs:}``): one per GPU when there are GPUs, else one per
    CPU core."""
    return gpu_count() or cpu_count()
