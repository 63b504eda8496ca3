"""The paper's open choices, each value against the reading's default, paired by seed: multirun/choices_*/
-> results/choices/choices.md (and stdout). Trains nothing; `make fig-choices` runs the sweeps first.

    python scripts/choices.py
    python scripts/choices.py --multirun-dir multirun --out results/choices

What it computes: src/clsuite/analysis/choices.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clsuite.analysis.choices import main

if __name__ == "__main__":
    sys.exit(main())
