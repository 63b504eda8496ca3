"""Push an experiment's results files to W&B without training: a run per grid point, then the charts.

    python scripts/wandb_sync.py table2                 # offline runs under multirun/table2/*/wandb/
    python scripts/wandb_sync.py table2 --mode online   # straight to the W&B server
    python scripts/wandb_sync.py table2 --check         # what the offline runs on disk hold

Installed: `clsuite wandb ...` (clsuite.commands), the same function. See src/clsuite/wandb_sync.py
for the names, groups, keys and charts.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clsuite.wandb_sync import main

if __name__ == "__main__":
    sys.exit(main())
