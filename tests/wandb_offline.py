"""W&B offline runs decoded without network, for the tests (what docs/GUIDE.md, "Weights & Biases", says a run logs).

The installed wandb (0.31) reads these files only in its Go core (its Python ``DataStore`` reader is
gone) and has no command that prints them.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path


def _records(path: Path):
    """Raw records of a W&B transaction log (LevelDB log format: 32 KiB blocks, 7-byte headers)."""
    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path}: not a W&B run file")
    block, pos, buf = 32768, 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            pos += left
            continue
        buf = (b"" if kind in (1, 2) else buf) + data[pos + 7 : pos + 7 + length]  # full, first | middle, last
        pos += 7 + length
        if kind in (1, 4):
            yield buf


def _nested(items) -> dict:
    return {"/".join(it.nested_key) or it.key: json.loads(it.value_json) for it in items}


def read_offline_run(run_dir, timeout: float = 60.0) -> dict:
    """An offline run decoded: name, group, job_type, tags, notes, config, history rows, summary, axes.

    W&B's core process writes the file and can still hold its records in a buffer when ``finish``
    has returned (the file then has its header and nothing else): the reader waits, up to ``timeout``
    seconds, for the run's last record (``exit``) and otherwise returns what the file holds."""
    (path,) = Path(run_dir).glob("run-*.wandb")
    deadline = time.monotonic() + timeout
    while True:
        last = time.monotonic() > deadline
        try:
            out = _decode(path)
        except Exception:  # an empty file, or a record cut at the end of what was flushed
            if last:
                raise
        else:
            if out["exit_code"] is not None or last:
                return out
        time.sleep(0.1)


def _decode(path: Path) -> dict:
    from wandb.proto import wandb_internal_pb2 as pb

    out = {"config": {}, "history": [], "summary": {}, "axes": {}, "exit_code": None}
    for raw in _records(path):
        r = pb.Record()
        r.ParseFromString(raw)
        kind = r.WhichOneof("record_type")
        if kind == "run":
            out.update(
                id=r.run.run_id,
                name=r.run.display_name,
                group=r.run.run_group,
                job_type=r.run.job_type,
                tags=list(r.run.tags),
                notes=r.run.notes,
                project=r.run.project,
            )
            out["config"].update({u.key: json.loads(u.value_json) for u in r.run.config.update})
        elif kind == "config":
            out["config"].update({u.key: json.loads(u.value_json) for u in r.config.update if u.key})
        elif kind == "history":
            out["history"].append(_nested(r.history.item))
        elif kind == "summary":
            out["summary"].update(_nested(r.summary.update))
        elif kind == "metric":
            out["axes"][r.metric.name or r.metric.glob_name] = r.metric.step_metric or None
        elif kind == "exit":
            out["exit_code"] = r.exit.exit_code
    return out


def offline_runs(root) -> list[Path]:
    """Every current (not superseded) offline run folder under ``root``."""
    return sorted(
        p
        for p in Path(root).rglob("offline-run-*")
        if p.is_dir() and not p.is_symlink() and "superseded" not in p.parts
    )
