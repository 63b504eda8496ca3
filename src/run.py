"""Run one continual-learning experiment (or a sweep with ``-m``, or any verb) from a checkout:
``python src/run.py ...`` = ``clsuite ...`` once installed (README.md, "The main commands").

Everything happens in ``clsuite.commands`` / ``clsuite.cli``; this file only puts ``src/`` on the
path, also for the jobs that other processes start (joblib workers, submitit / SLURM jobs), so it
is not part of the code identity (docs/RUNS.md, "Identity").
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
