"""What a sweep did, counted from the jobs' own files: the summary and the exit status
(docs/INTEGRITY.md, sections 2 and 5).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from clsuite.run.identity import config_hash
from clsuite.run.io import FAILED_FILE, LOCK_FILE, RESULTS_FILE, read_failure, read_log
from clsuite.run.progress import FAILED
from clsuite.run.results import read_run
from clsuite.sweep.locks import live_holder


def job_state(folder: Path, config: str | None = None) -> tuple[str, str]:
    """(finished | failed | interrupted | busy, error line) of one job folder, from its files;
    ``config``: the hash of the config the grid asked for there (a results file of another is not
    this job's: failed, and the next sweep sets it aside and reruns the job)."""
    run = read_run(folder / RESULTS_FILE)
    if run.ok and (config is None or config_hash(run.data["config"]) == config):
        return "finished", ""
    if run.ok:
        return "failed", f"its {RESULTS_FILE} is another job's run, not the grid's (a rerun sets it aside)"
    rec = read_failure(folder / FAILED_FILE)
    if rec is not None:
        return ("interrupted" if rec.get("status") == "interrupted" else "failed"), str(rec.get("error", ""))
    if live_holder(folder / LOCK_FILE) is not None:  # asked for without waiting, as a job does
        return "busy", ""
    return "failed", "left no results and no failure record (its files could not be written?)"


def summarize(sweep_dir, sweep_id: str | None = None, grid: list[dict] | None = None) -> dict:
    """Counts of the jobs of one sweep invocation and why jobs reran (``reruns``)."""
    sweep_dir = Path(sweep_dir)
    log = read_log(sweep_dir, sweep_id)
    counts = dict.fromkeys(("ran", "skipped", "reused", "busy", "interrupted", "failed"), 0)
    counts.update(Counter(str(rec.get("status")) for rec in log))
    failed = [f"{r.get('job')}: {r.get('error', '')}" for r in log if str(r.get("status")) in ("failed", "interrupted")]
    reasons = dict(Counter(r for rec in log for r in rec.get("reasons") or ()))
    out = {**counts, "reruns": reasons, "failed_jobs": failed, "sweep_dir": str(sweep_dir)}
    dirs = [g["dir"] for g in grid or () if g.get("dir")]
    if grid is not None and len(dirs) == len(grid):
        states = {g["dir"]: job_state(sweep_dir / g["dir"], g.get("config_hash")) for g in grid}
        out["expected"] = len(grid)
        out["finished_total"] = sum(s == "finished" for s, _ in states.values())
        last = {str(r.get("job")): r for r in log}  # a job's outcome in this invocation: its last line
        kept = [d for d, (s, _) in states.items() if s == "finished" and last.get(d, {}).get("status") in FAILED]
        for d in kept:  # failed in this sweep: failed, though its folder holds an earlier sweep's results
            states[d] = (str(last[d]["status"]), str(last[d].get("error", "")))
        out["kept_earlier"] = len(kept)
        for status in ("failed", "interrupted", "busy"):
            out[status] = sum(s == status for s, _ in states.values())
        out["failed_jobs"] = [f"{d}: {e}" for d, (s, e) in states.items() if s in ("failed", "interrupted")]
        out["log_lost"] = bool(grid) and not any(counts.values())  # every job logs a line: none arrived
    return out
