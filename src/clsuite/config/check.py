"""The config groups and options of ``conf/``, the resolvers, and every check on a config before a run:
:func:`check_overrides` (unknown options and keys) and :func:`validate` (a composed config). A failure is
one ``ConfigError`` line (docs/CONFIG.md, opening; docs/DEVELOPING.md, "The path of one run").
"""

from __future__ import annotations

import difflib
import functools
import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from clsuite.config.home import CONF_DIR, SWEEPS_DIR, data_dir, n_parallel_jobs  # noqa: F401  (re-exported)
from clsuite.config.numerics import check_environment
from clsuite.config.paths import NAMED, RUN_ID, job_dirname, safe_name
from clsuite.config.schema import ConfigError, check, check_rules, dotted_get, logger_kind, value
from clsuite.core.errors import import_outside

GROUPS = tuple(sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir()))
RESOLVERS = {  # ${clsuite_n_jobs:} (launcher=joblib), ${clsuite_run_id:} (hydra.run.dir), ${clsuite_dirname:...}
    "clsuite_n_jobs": n_parallel_jobs,
    "clsuite_data_dir": data_dir,  # data.root's default
    "clsuite_run_id": lambda: RUN_ID,
    "clsuite_dirname": job_dirname,
}
for _name, _fn in RESOLVERS.items():  # registered wherever the config is read
    if not OmegaConf.has_resolver(_name):
        OmegaConf.register_new_resolver(_name, _fn, use_cache=_name == "clsuite_run_id")


def group_options(group: str) -> list[str]:
    """The options of a config group of ``conf/``: its yaml files (an unknown option is Hydra's refusal,
    whose list holds those of every folder on its search path: ``clsuite.config.compose.error_line``)."""
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def search_dirs(overrides: list[str]) -> list[Path]:
    """The folders of a ``hydra.searchpath=[...]`` override (its ``file://`` or plain entries: config
    folders on Hydra's search path; ``--config-dir`` is the caller's ``extra_dirs``); ``ConfigError``
    for an entry that Hydra would skip with a warning no one sees (no such folder, no such package)."""
    from hydra._internal.sources_registry import SourcesRegistry
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.plugins import Plugins

    given = [o for o in overrides if o.startswith("hydra.searchpath=")]
    if not given:
        return []
    try:
        values = [o.value() for o in OverridesParser.create().parse_overrides(given)]
    except Exception:  # (composing names it, as it names a value that is not a list of strings)
        return []
    Plugins.instance()  # (registers Hydra's config sources)
    folders = []
    for entry in (e for v in values if isinstance(v, list) for e in v if isinstance(e, str)):
        scheme, sep, path = entry.partition("://")
        scheme, path = (scheme, path) if sep else ("file", entry)
        try:
            source = SourcesRegistry.instance().resolve(scheme)("hydra.searchpath", f"{scheme}://{path}")
        except ValueError as e:  # an unknown scheme: Hydra's line names the valid ones
            raise ConfigError(f"hydra.searchpath entry {entry!r}: {e}") from None
        if scheme == "pkg":  # (a package that fails to import: that failure's line)
            import_outside(path, f"hydra.searchpath entry {entry!r}")
        if not source.available():
            what = {"file": "a folder", "pkg": "an importable package"}.get(scheme, "a config source Hydra can read")
            raise ConfigError(f"hydra.searchpath entry {entry!r} is not {what}")
        if scheme == "file":
            folders.append(Path(path))
    return folders


def _yamls(folder: Path) -> set[str]:
    """The configs of a config folder: ``config.yaml``, ``method/er.yaml``, ..."""
    return {p.relative_to(folder).as_posix() for p in (*folder.glob("*.yaml"), *folder.glob("*/*.yaml"))}


@functools.cache
def top_level_keys() -> list[str]:
    base = OmegaConf.load(CONF_DIR / "config.yaml")
    return sorted({*(k for k in base if k not in ("defaults", "hydra")), *GROUPS})


def check_overrides(args: list[str], extra_dirs=()) -> None:
    """The one check of unknown keys (``+memroy=50``) in overrides, and of config folders (``extra_dirs``,
    ``hydra.searchpath``) whose files Hydra would skip (docs/DEVELOPING.md, step 2); an unknown group option
    (``method=foo``) is Hydra's own refusal (``clsuite.config.compose.error_line``)."""
    known = top_level_keys()  # (cached: read once per process)
    extra = [*map(Path, extra_dirs), *search_dirs(args)]
    for folder in extra:  # Hydra reads conf/ first: a yaml of the same name in another folder is never read
        same = [] if folder.resolve() == CONF_DIR.resolve() else sorted(_yamls(folder) & _yamls(CONF_DIR))
        if same:
            raise ConfigError(
                f"{folder / same[0]} is never read: Hydra reads the suite's conf/{same[0]} first; rename it"
            )
    for arg in args:
        if arg.startswith("-") or ("=" not in arg and not arg.startswith("~")):
            continue
        key = arg.split("=", 1)[0]
        bare = key.lstrip("+~").split("@")[0]  # `update@method.update=reservoir`: the group is `update`
        if bare.startswith(("hydra", "logger.")):
            continue  # Hydra's own keys; logger options are passed through to the logger
        adds = key.startswith("+") and not key.startswith("++")  # `+k=v` adds a key the suite never reads,
        adds = adds and not bare.startswith("callbacks.")  # but a callback (conf/callbacks/: each node is built)
        if adds and bare in known:
            raise ConfigError(f"{bare} is already in the config: write {arg[1:]!r} (+ adds a key it lacks)")
        if adds or bare.split(".")[0] not in known:
            close = difflib.get_close_matches(bare.split(".")[0], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key {bare!r} in {arg!r}{hint}; valid top-level keys: {', '.join(known)}")
        if bare in GROUPS and key.startswith("~") and bare != "tuned":  # (tuned is optional)
            options = ", ".join(group_options(bare))
            raise ConfigError(f"{bare} cannot be deleted ({arg}): every run needs one; valid choices: {options}")
        path = next((v for v in arg.partition("=")[2].split(",") if "/" in v or "\\" in v), None)
        if bare in GROUPS and path is not None:  # a path, not an option's name: Hydra would read that file
            raise ConfigError(f"unknown {bare} {path.strip()!r}; valid choices: {', '.join(group_options(bare))}")


# ----------------------------------------------------------------------------- the check


def check_names(cfg) -> None:
    """Every config value of ``clsuite.config.paths.NAMED``: names that become folder names (checked by
    :func:`validate`, and for a sweep's own folder by ``clsuite.sweep.callback``)."""
    for key in NAMED:
        value = dotted_get(cfg, key)
        if value is not None:
            safe_name(value, key)


def checked_source(cfg: DictConfig):
    """The config's keys and rules checked (``clsuite.config.schema``), returning the benchmark's bound
    source, looked up once (here: numpy only for a config that is checked, not for ``--help``)."""
    from clsuite.core.data import sources

    check(cfg)
    source = sources.bind(value(cfg, "benchmark"))
    check_rules(cfg, source)
    return source


def validate(cfg: DictConfig) -> None:
    """Every check a composed config must pass before a run (docs/DEVELOPING.md, step 2): ``ConfigError``."""
    check_names(cfg)
    source = checked_source(cfg)
    check_environment(str(cfg.trainer.numerics))  # a kernel variable portable cannot pin (clsuite.config.numerics)
    logger = cfg.get("logger") or {}  # logger.required=true: W&B must start (what is known before a run)
    if logger_kind(logger) == "wandb" and logger.get("required") and (why := cannot_start(logger)):
        raise ConfigError(f"W&B is required (logger.required=true) but cannot start: {why}; nothing trained")
    if source.files is None:  # generated data: no files
        return
    from clsuite.core.data.files import DataError, absent, unreadable

    d = cfg.data
    root = Path(str(d.root))
    fetched = bool(d.download) and source.downloads  # files not there: the reader downloads them
    if source.downloads and not fetched and not root.is_dir():  # (one that cannot download: absent names the file)
        raise ConfigError(
            f"data directory {d.root!r} does not exist; set DATA_DIR or data.root to the folder holding "
            f"{cfg.benchmark.source}'s files (e.g. DATA_DIR=../shared/datasets), or pass data.download=true on a "
            "machine with network"
        )
    rels = source.file_list()
    if problem := unreadable(root, rels, folders=source.folders):
        raise ConfigError(problem)
    if not fetched and (problem := absent(root, rels, cfg.benchmark.source, source.downloads)):
        raise ConfigError(problem)
    try:  # md5 (an image-folder archive: its read), memoised for the run
        source.check_files(root, bool(d.download), bool(d.get("verify_md5", True)), d.get("cache_dir"))
    except DataError as e:
        raise ConfigError(str(e)) from None


def wandb_settings(logger_cfg) -> dict:
    """project / entity / mode from the ``logger`` config, else conf/logger/wandb.yaml; $WANDB_MODE wins."""
    default = OmegaConf.load(Path(CONF_DIR) / "logger" / "wandb.yaml")
    lc = logger_cfg or {}
    return {
        "project": lc.get("project") or default.project,
        "entity": lc.get("entity") or default.entity,
        "mode": os.environ.get("WANDB_MODE") or lc.get("mode") or default.mode,
    }


def cannot_start(logger_cfg) -> str | None:
    """Why W&B cannot start, when a run can know it before it starts (docs/INTEGRITY.md, section 6: not
    importable, or online without an API key, where ``wandb.init`` refuses); else None."""
    try:
        import wandb  # noqa: F401
    except Exception as e:
        return f"wandb cannot be imported ({type(e).__name__}: {e})"
    if wandb_settings(logger_cfg)["mode"] != "online":
        return None
    try:
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib.wbauth import authenticate

        host = wandb_setup.singleton().settings.base_url
        auth = authenticate.authenticate_session(host=host, source="clsuite", prompt=False, update_session=False)
    except Exception:  # (another wandb version: its own start decides)
        return None
    if auth is None:
        return "online (mode, $WANDB_MODE) without an API key: set WANDB_API_KEY or run `wandb login`, or log offline"
    return None
