"""Tables and figures of the paper from the results files of a sweep.

    python scripts/aggregate.py table2                  # multirun/table2/ -> results/table2/
    python scripts/aggregate.py memory first_task tau   # several experiments
    python scripts/aggregate.py table2 --strict         # exit 1 if a run is missing or failed
    python scripts/aggregate.py table2 --wandb          # also one W&B run with the figures (offline)

See src/clsuite/aggregate.py for what each experiment produces.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clsuite.aggregate import main

if __name__ == "__main__":
    sys.exit(main())
