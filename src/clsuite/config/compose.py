"""Check a command line before Hydra composes it, compose one that is not run (``clsuite.api``), and
turn Hydra's errors into one line naming the key and the valid choices (docs/DEVELOPING.md, "The
path of one run", step 2).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
from pathlib import Path

import yaml
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from clsuite.config.check import CONF_DIR, ConfigError, check_overrides, group_options


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Hydra's own parser of the command line (the same one ``hydra.main`` uses)."""
    from hydra._internal.utils import get_args_parser

    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return get_args_parser().parse_args(argv)
    except SystemExit:  # argparse's usage and error lines: its last line, once
        why = said.getvalue().strip().splitlines()[-1:] or ["?"]
        raise ConfigError(f"{why[0].split(': error: ', 1)[-1]}; see --help") from None


def check(argv: list[str]) -> tuple[argparse.Namespace, list[Path]]:
    """A command line parsed, its config folders and overrides checked (``clsuite.config.check.check_overrides``)
    before Hydra reads them: (its arguments, its ``--config-dir`` folders); ``ConfigError`` (one line)."""
    args = parse_args(argv)
    extra = [] if args.config_dir is None else [Path(args.config_dir).resolve()]
    if extra and not extra[0].is_dir():
        raise ConfigError(f"--config-dir {args.config_dir!r} is not a folder")
    check_overrides(list(args.overrides), extra_dirs=extra)
    return args, extra


def compose(argv: list[str], mode: RunMode = RunMode.RUN, config_name: str = "config") -> DictConfig:
    """The config of a command line that is not run (``clsuite.api.compose``, ``clsuite.paper.count``),
    composed as ``hydra.main`` composes it (``--config-dir``, and a sweep's overrides with ``mode``
    MULTIRUN, which ``hydra.compose`` lacks); ``ConfigError`` (one line) when it fails."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_automatic_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.core.global_hydra import GlobalHydra

    args, extra = check(argv)
    name, overrides = args.config_name or config_name, list(args.overrides)
    search_path = create_automatic_config_search_path(None, None, str(CONF_DIR))
    for folder in extra:
        search_path.prepend(provider="command-line", path=f"file://{folder}", anchor=SearchPathQuery(provider="schema"))
    try:
        hydra = Hydra.create_main_hydra2(task_name="run", config_search_path=search_path)
        try:
            return hydra.compose_config(name, overrides, run_mode=mode, with_log_configuration=False, from_shell=True)
        finally:
            GlobalHydra.instance().clear()
    except Exception as e:
        raise ConfigError(error_line(e, overrides, name)) from None


# ----------------------------------------------------------------------------- Hydra's errors


def error_line(e: BaseException, overrides: list[str] = (), config_name: str = "config") -> str:
    """One line for a Hydra / OmegaConf exception: the key, what is wrong, the valid choices."""
    text = str(e)
    first = " ".join(text.split("\n")[0].split()) or type(e).__name__
    if isinstance(e, yaml.MarkedYAMLError) and (mark := e.problem_mark or e.context_mark):
        why = f"{e.problem} ({e.context})" if e.problem and e.context else e.problem or e.context
        return f"bad YAML in {mark.name}, line {mark.line + 1}, column {mark.column + 1}: {why}"
    if m := re.match(r"(?:Ambiguous value for argument|Sweep parameters) '(([^'=]+)=([^']*))'", text):  # no -m
        arg, key, value = m.groups()
        return (
            f"{arg} sweeps over several values: add -m (--multirun) to run each one, or quote a "
            f"string ({key}='{value}'); a single run takes one value"
        )
    if m := re.match(r"Could not override '([^']+)'", text):
        return _cannot_override(m.group(1), text, overrides, config_name)
    if m := re.search(r"Could not find '([^'/]+)/([^']*)'\n\nAvailable options in '[^']*':\n((?:\t.*\n)*)", text):
        group, option, options = m.groups()  # (on the command line or in a yaml's defaults; every search path's)
        return f"unknown {group} {option!r}; valid choices: {', '.join(options.split())}"
    if type(e).__name__ == "OverrideParseException":  # (the override Hydra could not parse)
        return f"could not parse {e.override!r}: {first} (Hydra's override syntax: key=value, key=a,b with -m)"
    if type(e).__name__ == "InstantiationException":
        return f"could not build {first}"
    return first


def _cannot_override(key: str, text: str, overrides: list[str], config_name: str) -> str:
    group = key.split("@")[0]
    if "Did you mean to override" in text and group in ("replay", "update"):
        value = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key), "...")
        return (
            f"{group} is chosen per method: write {group}@method.{group}={value}; valid choices: "
            f"{', '.join(group_options(group))}"
        )
    if "No match in the defaults list" in text and group in ("replay", "update"):
        return f"{key} needs a method with a {group} policy; valid choices: method={','.join(methods_with(group))}"
    parent, _, leaf = key.rpartition(".")
    base = _compose_without(key, overrides, config_name)
    node = OmegaConf.select(base, parent, default=None) if (base is not None and parent) else base
    if isinstance(node, DictConfig):
        valid = ", ".join(k for k in node if k != "_target_")
        where = f"keys of {parent}" if parent else "top-level keys"
        return f"unknown key {key!r}; valid {where}: {valid}"
    if base is not None and parent:
        method = OmegaConf.select(base, "method.name", default="?")
        return f"unknown key {key!r}: {parent} is null for method={method}; it has no {leaf}"
    return f"unknown key {key!r}"


def _compose_without(key: str, overrides: list[str], config_name: str) -> DictConfig | None:
    from hydra import compose, initialize_config_dir

    rest = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != key and "," not in o]
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name=config_name, overrides=rest)
    except Exception:
        return None


@functools.cache
def methods_with(group: str) -> list[str]:
    """The methods whose yaml has a ``/<group>@<group>`` default (``replay``, ``update``)."""
    out = []
    for p in sorted((CONF_DIR / "method").glob("*.yaml")):
        defaults = (yaml.safe_load(p.read_text()) or {}).get("defaults") or []
        if any(isinstance(d, dict) and any(k.startswith(f"/{group}@") for k in d) for d in defaults):
            out.append(p.stem)
    return out
