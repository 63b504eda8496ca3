"""What a sweep reads from the environment: ``CLSUITE_RESUME``, ``CLSUITE_REUSE``, ``CLSUITE_GPU_POOL``."""

from __future__ import annotations

import os

from clsuite.schema import RESUME_MODES


def env_flag(name: str, default: bool = True) -> bool:
    v = os.environ.get(name)
    return default if v is None or v == "" else v.lower() not in ("0", "false", "no", "off")


def resume_mode(cfg: dict) -> str:
    """``strict`` (default), ``config_only`` or ``off``: the ``resume`` key, else ``$CLSUITE_RESUME``."""
    env = (os.environ.get("CLSUITE_RESUME") or "").lower()
    if env in ("0", "false", "no", "off"):
        return "off"
    if env in RESUME_MODES:
        return env
    return str(cfg.get("resume") or "strict")
