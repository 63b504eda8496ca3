"""``clsuite wandb`` in a checkout: an experiment's results files to W&B, then its aggregate run
(``clsuite.analysis.wandb_sync``; docs/GUIDE.md, "Tables and figures per experiment").

    python scripts/wandb_sync.py table2 [--mode online]   # offline runs, or straight to the W&B server
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from clsuite.commands import main

main(["wandb", *sys.argv[1:]])
