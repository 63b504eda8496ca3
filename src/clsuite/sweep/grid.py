"""The grid of a sweep: the jobs it will launch, each composed and validated before any starts, then
``grid.json`` with each job's folder and config hash (docs/DEVELOPING.md, "The path of one run";
docs/INTEGRITY.md, section 2).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

from omegaconf import DictConfig, OmegaConf

from clsuite.config.check import ConfigError
from clsuite.config.paths import job_dirname
from clsuite.run.identity import config_hash

PER_JOB = ("override_dirname", "hydra.job.num", "hydra:job.num", "hydra.job.id", "hydra:job.id")  # a subdir per job


def expand_grid(config: DictConfig) -> list[dict]:
    """The jobs a multirun will launch, ``[{"overrides": [...], "dir": <subdir>}, ...]``, as Hydra's basic
    sweeper expands them (``hydra.sweeper.params``, then the command line's overrides, which win);
    ``dir``: the job's folder name when ``hydra.sweep.subdir`` is the override dirname."""
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    h = config.hydra
    params = h.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=False) if params else {}  # (`${...}` is a job's value)
    args = [f"{k}={v}" for k, v in params.items()] + OmegaConf.to_container(h.overrides.task, resolve=False)
    gh = GlobalHydra.instance()  # (in the sweep's process: glob() lists a group's options through its loader)
    parser = OverridesParser.create(config_loader=gh.config_loader() if gh.is_initialized() else None)
    jobs = BasicSweeper.split_arguments(parser.parse_overrides(args), None)[0]
    od = h.job.config.override_dirname
    subdir_is_dirname = "override_dirname" in str(OmegaConf.to_container(h.sweep, resolve=False).get("subdir"))
    out = []
    for job in jobs:
        parsed = parser.parse_overrides(job)
        name = job_dirname(get_overrides_dirname(parsed, list(od.exclude_keys), od.item_sep, od.kv_sep))
        out.append({"overrides": list(job), "dir": name if subdir_is_dirname else None})
    return out


def validate_grid(config: DictConfig, jobs: list[dict]) -> None:
    """Compose and validate every job of the sweep (``ConfigError`` names the first bad job); every job
    has the same ``trainer.numerics`` (a process chooses its CPU kernels once). Hydra composes once per
    distinct set of group choices; each job's plain values are set on a copy (existing keys unless
    added with ``+``), which is validated. Each job records its normalised config's hash
    (``config_hash``): the run its folder must hold (docs/INTEGRITY.md, section 2)."""
    import copy

    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import open_dict

    from clsuite.config.check import GROUPS, check_overrides, validate

    n_jobs = config.hydra.launcher.get("n_jobs")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1):
        raise ConfigError(f"hydra.launcher.n_jobs must be a whole number >= 1 (or -1: one per core), got {n_jobs!r}")
    name = config.hydra.job.config_name
    # a group's option (method=er_newest) may live in --config-dir or a file:// hydra.searchpath entry
    extra = [str(s.path) for s in config.hydra.runtime.get("config_sources") or [] if s.get("schema") == "file"]
    searchpath = [o for o in config.hydra.overrides.get("hydra") or () if o.lstrip("+~").startswith("hydra.searchpath")]
    parser = OverridesParser.create()
    bases: dict[tuple, DictConfig] = {}
    missing = object()
    numerics: dict[str, str] = {}  # trainer.numerics -> the first job asking for it
    for job in jobs:
        where = f"job {job.get('dir') or ' '.join(job['overrides'])}"
        try:
            check_overrides(job["overrides"], extra_dirs=extra)  # (the one check of unknown options and keys)
            composed, plain = [], []
            for text, o in zip(job["overrides"], parser.parse_overrides(job["overrides"])):
                key = o.key_or_group
                if key in GROUPS or key.startswith("hydra") or o.is_delete() or o.package is not None or "/" in key:
                    composed.append(text)
                else:
                    plain.append((key, o.value(), o.is_add() or o.is_force_add()))
            if tuple(composed) not in bases:
                bases[tuple(composed)] = compose(config_name=name, overrides=[*searchpath, *composed])
            cfg = copy.deepcopy(bases[tuple(composed)])
            with open_dict(cfg):
                for key, value, add in plain:
                    if not add and OmegaConf.select(cfg, key, default=missing) is missing:
                        raise ConfigError(f"unknown key {key!r}")
                    OmegaConf.update(cfg, key, value, merge=True, force_add=add)
        except ConfigError as e:
            raise ConfigError(f"{e} ({where})") from None
        except Exception as e:  # a composition error (an unknown key, a missing file)
            from clsuite.config.compose import error_line as hydra_error_line

            raise ConfigError(f"{hydra_error_line(e, job['overrides'], name)} ({where})") from None
        try:
            validate(cfg)
        except ConfigError as e:
            raise ConfigError(f"{e} ({where})") from None
        numerics.setdefault(str(cfg.trainer.numerics), where)
        job["config_hash"] = config_hash(cfg)  # the run this folder stands for (grid.json; clsuite.analysis)
    # clsuite.config.numerics: a process (a basic-launcher sweep, a joblib worker) pins its kernels once
    if len(numerics) > 1:
        (a, wa), (b, wb) = list(numerics.items())[:2]
        raise ConfigError(
            f"trainer.numerics takes one value per sweep (each process pins its CPU kernels once), got {a} ({wa}) "
            f"and {b} ({wb}); run one sweep per value"
        )


def check_folders(config: DictConfig, jobs: list[dict]) -> None:
    """``ConfigError`` when the sweep spans experiments (its folder, grid and summary are one
    experiment's), a job folder would leave the sweep's (``hydra.sweep.subdir`` absolute or with
    ``..``, or a job folder that is a link), or two jobs would share a folder (a fixed ``hydra.sweep.subdir``, or jobs that differ
    only in keys left out of folder names: each would resume from or overwrite the other's)."""
    experiments = sorted(
        {o.partition("=")[2] for j in jobs for o in j["overrides"] if o.partition("=")[0].lstrip("+~") == "experiment"}
    )
    if len(experiments) > 1:
        raise ConfigError(
            f"experiment is swept ({','.join(experiments)}): a sweep writes one experiment's folder, grid and "
            f"summary; run one sweep per experiment (e.g. -m experiment={experiments[0]} ...)"
        )
    subdir = str(OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir"))
    if PurePath(subdir).is_absolute() or ".." in PurePath(subdir).parts:
        raise ConfigError(
            f"hydra.sweep.subdir={subdir!r} leaves the sweep's folder: its jobs would write where neither its grid "
            "nor `clsuite aggregate` looks; use a folder inside hydra.sweep.dir (the default: the override dirname)"
        )
    sweep_dir = Path(str(config.hydra.sweep.dir))
    for link in (sweep_dir / j["dir"] for j in jobs if j.get("dir")):
        if link.is_symlink():
            raise ConfigError(
                f"the job folder {link} is a link (to {os.readlink(link)}): a sweep writes only inside its folder, "
                "where its grid and `clsuite aggregate` count the jobs; move that folder back or remove the link"
            )
    if len(jobs) < 2:
        return
    if not any(p in subdir for p in PER_JOB):
        raise ConfigError(
            f"hydra.sweep.subdir={subdir!r} is the same for all {len(jobs)} jobs: they would write into one "
            "folder; use a per-job subdir (${hydra.job.num} or the default, the override dirname)"
        )
    seen: dict[str, list[str]] = {}
    for j in jobs:
        if j.get("dir") is not None:
            seen.setdefault(j["dir"], []).append(" ".join(j["overrides"]))
    for d, who in seen.items():
        if len(who) > 1:
            raise ConfigError(
                f"jobs {who[0]!r} and {who[1]!r} would share the folder {d!r}: they differ only in keys left out "
                "of folder names (identity.IGNORED_KEYS); sweep one value of those keys per sweep"
            )
