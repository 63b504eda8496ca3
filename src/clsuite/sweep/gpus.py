"""A GPU per job: ``launcher=joblib`` sets ``CLSUITE_GPU_POOL=1`` in its jobs; each job then takes a
free slot of a machine-wide lock-file pool (``fcntl.flock``, released by the OS even when the job
dies) and runs on that GPU through ``CLSUITE_GPU`` (read by ``clsuite.experiment.pick_device``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from clsuite.home import gpu_count, jobs_per_gpu
from clsuite.sweep.job import env_flag

_HELD: list[int] = []  # GPU slots held by this process (CLSUITE_GPU then comes from the pool)


def _pool_wanted(trainer_cfg) -> bool:
    if not env_flag("CLSUITE_GPU_POOL", default=False):
        return False
    if os.environ.get("CLSUITE_GPU") and not _HELD:  # the user chose the GPU
        return False
    if trainer_cfg is None:
        return True
    return trainer_cfg.get("device_index") is None and str(trainer_cfg.get("accelerator", "auto")) != "cpu"


@contextlib.contextmanager
def gpu_slot(trainer_cfg=None, job_num: int = 0, poll_s: float = 2.0):
    """Hold a free slot ``gpu<g>.<s>.lock`` for the duration (``CLSUITE_GPU=g``): free GPUs first,
    starting at GPU ``job_num % n``. Yields g, or None when the pool is off (not under launcher=joblib,
    a device chosen, no GPU)."""
    if not _pool_wanted(trainer_cfg):
        yield None
        return
    n = gpu_count()
    if n == 0:
        yield None
        return
    import fcntl

    d = Path(os.environ.get("CLSUITE_GPU_LOCK_DIR") or Path(tempfile.gettempdir()) / f"clsuite-gpu-locks-{os.getuid()}")
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
