"""Folder names of sweep jobs and single runs, and the config resolvers that make them.

- :func:`job_dirname`: a job's folder is Hydra's override dirname; one longer than
  :data:`MAX_DIRNAME` characters (file systems stop at 255 bytes) is shortened to a prefix plus a
  hash of the whole (the job writes its overrides inside, ``overrides.json``);
- resolvers: ``${clsuite_n_jobs:}`` (launcher=joblib: one job per GPU slot, else per core),
  ``${clsuite_run_id:}`` (hydra.run.dir: two runs started in the same second get two folders) and
  ``${clsuite_dirname:...}`` (hydra.sweep.subdir).
"""

from __future__ import annotations

import hashlib
import uuid

from omegaconf import OmegaConf

from clsuite.sweep.gpus import n_parallel_jobs

MAX_DIRNAME = 200  # a job folder name longer than this is hashed
RUN_ID = uuid.uuid4().hex[:6]  # this process's run: the last part of a single run's folder name


def job_dirname(name: str) -> str:
    """The override dirname, or a prefix of it plus a hash when it is too long for a folder name."""
    if len(name.encode()) <= MAX_DIRNAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    prefix = name.encode()[: MAX_DIRNAME - 40].decode(errors="ignore").rsplit(",", 1)[0]
    return f"{prefix},hash={digest}"


def register_resolvers() -> None:
    for name, fn in (
        ("clsuite_n_jobs", n_parallel_jobs),
        ("clsuite_run_id", lambda: RUN_ID),
        ("clsuite_dirname", job_dirname),
    ):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn, use_cache=name == "clsuite_run_id")


register_resolvers()
