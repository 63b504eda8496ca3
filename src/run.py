"""Run one continual-learning experiment (or a sweep with ``-m``).

    python src/run.py                                   # AdaER / ER on split-MNIST, M=100
    python src/run.py -m method=adaer,mir,er memory=50,100,200

Bad input (unknown method, tau outside [0, 1], missing data, ...) ends with one
``error:`` line and exit status 2, before any training.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from clsuite.config import ConfigError, check_overrides, validate  # noqa: E402
from clsuite.data.files import DataError  # noqa: E402


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    from clsuite.experiment import format_report, run_experiment
    from clsuite.loggers import make_logger

    try:
        validate(cfg)
        out_dir = HydraConfig.get().runtime.output_dir
        with make_logger(cfg, out_dir) as logger:
            results = run_experiment(cfg, out_dir, logger=logger)
    except (ConfigError, DataError) as e:
        fail(str(e))
    print(format_report(results))
    print(f"results: {Path(out_dir) / 'results.json'}")
    return results["metrics"]["acc"]


if __name__ == "__main__":
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as e:
        fail(str(e))
    main()
