"""The reproduction report from the results files on disk (trains nothing).

    python scripts/report.py          # multirun/**/results.json -> results/report/REPRODUCTION.md + figures/
    python scripts/report.py --docs   # ... and docs/REPRODUCTION.md + docs/figures/ (only if every section has runs)
    make report [DOCS=1]              # the same

Installed: `clsuite report [--docs]` (clsuite.commands), the same function. Exit status and what is
written: src/clsuite/analysis/report.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from clsuite.analysis.report import main_report  # noqa: E402

if __name__ == "__main__":
    sys.exit(main_report(root=ROOT))
