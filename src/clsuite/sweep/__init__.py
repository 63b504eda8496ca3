"""Sweeps (Hydra multiruns), one module per concern, each opening with it: ``job`` (:class:`Job`), ``index``,
``grid``, ``summary``, ``callback`` (the Hydra callback that ties them together), ``gpus``; job folder
names: ``clsuite.paths``; the job lock: ``clsuite.locks`` (the layers: docs/DEVELOPING.md).
"""

from clsuite.locks import HOST, JobLock, live_holder
from clsuite.paths import MAX_DIRNAME, job_dirname
from clsuite.sweep.callback import STARTED, SweepCallback, callback_failed, last_summary
from clsuite.sweep.gpus import gpu_slot
from clsuite.sweep.grid import check_folders, expand_grid, validate_grid
from clsuite.sweep.index import INDEX_DIR, index_result, reindex
from clsuite.sweep.job import Job
from clsuite.sweep.summary import job_state, summarize

__all__ = [
    "HOST", "INDEX_DIR", "MAX_DIRNAME", "STARTED", "Job", "JobLock", "SweepCallback", "callback_failed", "check_folders",
    "expand_grid", "gpu_slot", "index_result", "job_dirname", "job_state", "last_summary", "live_holder", "reindex",
    "summarize", "validate_grid",
]  # fmt: skip
