"""The paper's claims judged from the results files on disk, under rule 4 (Holm), the former rule, or both.

    python scripts/claims.py                       # multirun/ -> both tables from the same runs + the verdicts that moved
    python scripts/claims.py --rule holm           # the claims table of the report (rule 4: Holm over each claim)
    python scripts/claims.py --rule interval       # the former rule: any 95% interval below 0 falsifies
    python scripts/claims.py --multirun-dir DIR --details   # ... and every comparison of every claim

Prints Markdown to stdout, writes nothing, trains nothing. Exit 2 with one ``error:`` line when
DIR holds no experiment. Rules: src/clsuite/analysis/claims.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from clsuite.analysis import tables as tb  # noqa: E402
from clsuite.analysis.claims import judge_all  # noqa: E402
from clsuite.analysis.load import experiment_names, load_experiment  # noqa: E402

RULES = {"holm": [True], "interval": [False], "both": [False, True]}  # family_wise per table, in print order


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="The paper's claims from multirun/**/results.json (writes nothing).")
    ap.add_argument("--multirun-dir", default=str(ROOT / "multirun"))
    ap.add_argument("--rule", choices=sorted(RULES), default="both",
                    help="holm: rule 4 (the report's); interval: the former rule; both (default): each, then what moved")  # fmt: skip
    ap.add_argument("--details", action="store_true", help="also every comparison of every claim")
    a = ap.parse_args(argv)
    root = Path(a.multirun_dir)
    names = experiment_names(root)
    if not names:
        print(f"error: --multirun-dir {root}: no experiment folder with runs in it", file=sys.stderr)
        return 2
    experiments = {n: load_experiment(root / n) for n in names}
    judged = [judge_all(experiments, family_wise=fw) for fw in RULES[a.rule]]
    for j in judged:
        print(tb.claims_markdown(j) if a.details else tb.claims(j).markdown())
    if len(judged) == 2:
        moved = tb.rule_change(*judged)
        print(moved.markdown() if moved.rows else "No verdict moved.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
