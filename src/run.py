"""Run one experiment (or a sweep with ``-m``, or any verb) from a checkout: ``python src/run.py ...`` =
``clsuite ...`` (README.md, "The main commands"). It only puts ``src/`` on the path, also for the jobs
other processes start, so it is not part of the code identity (docs/GUIDE.md, "Identity").
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
