"""Run one continual-learning experiment (or a sweep with ``-m``) from a checkout.

    python src/run.py                                   # = `clsuite` once installed (pip install .)
    python src/run.py -m method=adaer,mir,er memory=50,100,200
    python src/run.py --config-dir sweeps --config-name table2 launcher=joblib   # a paper sweep
    python src/run.py aggregate default                 # any verb of `clsuite` (clsuite.commands)

Everything happens in ``clsuite.commands`` / ``clsuite.cli`` (exit statuses, resume, locks,
signals: see there); this file only puts ``src/`` on the path, also for the jobs that other
processes start (joblib workers, submitit / SLURM jobs). It is not part of the code identity
(``clsuite.identity``): it computes nothing a run's numbers depend on.
"""

import os
import sys
from pathlib import Path

_SRC = str(Path(__file__).resolve().parent)
sys.path.insert(0, _SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH")) if p)

from clsuite.commands import main  # noqa: E402

if __name__ == "__main__":
    main()
