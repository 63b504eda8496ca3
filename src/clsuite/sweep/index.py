"""The reuse index (``multirun/.index/``): finished runs by identity key and config hash, so that another
experiment copies a run instead of training it (docs/GUIDE.md, "Resume and reuse").
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from clsuite.run.identity import config_hash, normalize
from clsuite.run.io import RESULTS_FILE, read_object, write_json_atomic
from clsuite.run.results import read_run

INDEX_DIR = ".index"
SCANNED_FILE = "_scanned.json"  # in the index folder: results files already read, with their mtimes


def index_result(root, results_path, res: dict, config_key: str, experiment, overwrite: bool = True) -> bool:
    """Point the index entries of a finished result (its config hash and, when it has one, its
    identity key) at ``results_path``; ``overwrite=False`` keeps entries that exist. True when an
    entry was written."""
    root = Path(root)
    key = (res.get("identity") or {}).get("key")
    keys = [config_key] + ([str(key)[:20]] if key else [])
    entry = {"path": os.path.relpath(Path(results_path).resolve(), root.resolve()), "experiment": experiment}
    wrote = False
    for k in keys:
        target = root / INDEX_DIR / f"{k}.json"
        if overwrite or not target.exists():
            with contextlib.suppress(OSError):
                write_json_atomic(target, entry)
                wrote = True
    return wrote


def reindex(root) -> int:
    """Index every sealed results file under ``root/<experiment>/<job>/`` that has no entry yet (an
    entry is never overwritten); the files read are kept with their mtime (``.index/_scanned.json``),
    so a rerun reads only new or changed ones. Returns how many results were newly indexed."""
    root = Path(root)
    scanned_path = root / INDEX_DIR / SCANNED_FILE
    scanned = read_object(scanned_path) or {}
    seen, added = {}, 0
    for path in sorted(root.glob(f"*/*/{RESULTS_FILE}")):  # .index/ holds files only: never matched
        rel = path.relative_to(root).as_posix()
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        seen[rel] = mtime
        if scanned.get(rel) == mtime:
            continue
        run = read_run(path)
        if not run.ok:
            continue
        cfg_key = config_hash(normalize(run.data["config"]))
        added += index_result(root, path, run.data, cfg_key, path.parent.parent.name, overwrite=False)
    with contextlib.suppress(OSError):
        write_json_atomic(scanned_path, seen)
    return added
