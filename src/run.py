"""Run one continual-learning experiment (or a sweep with ``-m``).

    python src/run.py                                   # AdaER / ER on split-MNIST, M=100
    python src/run.py -m method=adaer,mir,er memory=50,100,200
    python src/run.py --config-dir sweeps --config-name table2 launcher=joblib   # a paper sweep

In a multirun every job resumes (a finished run with the same resolved config is skipped), a
crashed job writes ``failed.json`` and the others go on; see ``clsuite/sweep.py``.

Bad input (unknown method, tau outside [0, 1], missing data, ...) ends with one
``error:`` line and exit status 2, before any training.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_SRC = str(Path(__file__).resolve().parent)
sys.path.insert(0, _SRC)
# Jobs started in other processes (joblib workers, submitit / SLURM jobs) import clsuite too.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH")) if p)

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.types import RunMode  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from clsuite import sweep  # noqa: E402  (registers the ${clsuite_n_jobs:} resolver of launcher=joblib)
from clsuite.config import ConfigError, check_overrides, validate  # noqa: E402
from clsuite.data.files import DataError  # noqa: E402


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    hc = HydraConfig.get()
    out_dir = hc.runtime.output_dir
    if hc.mode != RunMode.MULTIRUN:
        from clsuite.experiment import format_report, run_experiment
        from clsuite.loggers import make_logger

        try:
            validate(cfg)
            with make_logger(cfg, out_dir) as logger:
                results = run_experiment(cfg, out_dir, logger=logger)
        except (ConfigError, DataError) as e:
            fail(str(e))
        print(format_report(results))
        print(f"results: {Path(out_dir) / 'results.json'}")
        return results["metrics"]["acc"]

    # A multirun job: resume, and a crash is recorded (failed.json) without stopping the sweep.
    job = sweep.Job(cfg, out_dir, sweep_dir=hc.sweep.dir, overrides=hc.overrides.task, job_num=hc.job.num)
    t0 = time.perf_counter()
    try:
        validate(cfg)
        done = job.finished()
        if done is not None:
            results, how = done
            job.log(how)
            print(f"{how} {job.name}: results exist (Acc={results['metrics']['acc']:.2f})")
            return results["metrics"]["acc"]
        from clsuite.experiment import format_report, run_experiment  # torch: only for a job that trains
        from clsuite.loggers import make_logger

        with sweep.gpu_slot(cfg.trainer, job_num=job.job_num), make_logger(cfg, out_dir) as logger:
            results = run_experiment(cfg, out_dir, logger=logger)
    except Exception as e:  # (every job failure is recorded; KeyboardInterrupt is not)
        line = job.failed(e, time.perf_counter() - t0)
        print(f"error: {job.name}: {line} (details: {job.failed_path})", file=sys.stderr)
        return None
    job.succeeded(time.perf_counter() - t0)
    print(format_report(results))
    print(f"results: {job.results_path}")
    return results["metrics"]["acc"]


if __name__ == "__main__":
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as e:
        fail(str(e))
    main()
    if sweep.LAST_SUMMARY and sweep.LAST_SUMMARY.get("failed"):
        sys.exit(1)
