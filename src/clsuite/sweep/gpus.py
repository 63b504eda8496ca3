"""A GPU per job under ``launcher=joblib`` (``clsuite.cli.run_job``): each job takes a free slot of a
machine-wide lock-file pool (``fcntl.flock``, released by the OS even when the job dies) and runs on
that GPU (its ``trainer.device_index``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from clsuite.config.home import gpu_count

GPU_LOCK_DIR = Path(tempfile.gettempdir()) / f"clsuite-gpu-locks-{os.getuid()}"  # one pool per user and machine


@contextlib.contextmanager
def gpu_slot(trainer_cfg, n_jobs: int, job_num: int = 0, poll_s: float = 2.0):
    """Hold a free slot ``gpu<g>.<s>.lock`` of :data:`GPU_LOCK_DIR` for the duration: free GPUs first,
    starting at GPU ``job_num % n``, ``n_jobs`` slots shared evenly by the ``n`` GPUs. Yields g, or None
    when the run chose its device (``trainer.device_index``, ``trainer=cpu``) or there is no GPU. A slot
    that cannot be locked at all (``ENOLCK``) is an ``OSError`` naming it, not an endless wait."""
    chosen = trainer_cfg.get("device_index") is not None or str(trainer_cfg.get("accelerator", "auto")) == "cpu"
    n = 0 if chosen else gpu_count()
    if n == 0:
        yield None
        return
    import fcntl

    d, per_gpu = GPU_LOCK_DIR, max(1, -(-n_jobs // n))
    d.mkdir(parents=True, exist_ok=True)
    order = [(s, (job_num + i) % n) for s in range(per_gpu) for i in range(n)]
    waited = False
    while True:
        for s, g in order:
            f = open(d / f"gpu{g}.{s}.lock", "a+")  # noqa: SIM115  (closed in finally)
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held by another job
                f.close()
                continue
            except OSError as e:  # a file system without locks (ENOLCK): waiting would never end
                f.close()
                raise OSError(
                    e.errno,
                    f"{e.strerror}: the GPU pool needs flock in {d} (set TMPDIR to a local folder)",
                    str(f.name),
                ) from None
            try:
                f.seek(0)
                f.truncate()
                f.write(f"{os.getpid()} {socket.gethostname()}\n")
                f.flush()
                yield g
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
                f.close()
            return
        if not waited:
            print(f"waiting for a free GPU slot ({n} GPUs x {per_gpu} in {d})", file=sys.stderr)
            waited = True
        time.sleep(poll_s)
