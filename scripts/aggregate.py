"""``clsuite aggregate`` in a checkout: tables and figures of experiments from their results files,
multirun/<exp>/ -> results/<exp>/ (clsuite.analysis.report.main_aggregate).

    python scripts/aggregate.py table2                  # Table II layout, heatmaps
    python scripts/aggregate.py memory first_task tau   # several experiments
    python scripts/aggregate.py my_sweep                # any other sweep: a plain table of its axes
    python scripts/aggregate.py table2 --strict         # exit 1 if a run is missing, failed or left out
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from clsuite.commands import main

main(["aggregate", *sys.argv[1:]])
