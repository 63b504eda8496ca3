"""``clsuite wandb`` in a checkout: an experiment's results files to W&B without training, a run per
grid point, then the aggregate run: the experiment's tables and figures (clsuite.wandb_sync).

    python scripts/wandb_sync.py table2                 # offline runs under multirun/table2/*/wandb/
    python scripts/wandb_sync.py table2 --mode online   # straight to the W&B server
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from clsuite.commands import main

main(["wandb", *sys.argv[1:]])
