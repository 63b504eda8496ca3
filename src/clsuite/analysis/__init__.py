"""The analysis of results files, in layers (each imports only those above it):

- ``paper_values``: the paper's numbers and names, transcribed (never a result of this suite);
- ``load``: results files -> one row per distinct run (deduplicated by identity), status against the grid;
- ``stats``: mean, sample std, n per cell; paired differences over seeds (t interval, paired t, sign-flip);
- ``claims``: the paper's claims as paired comparisons, and the one verdict rule;
- ``tables`` / ``figures``: Markdown + LaTeX tables, PNG + PDF figures;
- ``report``: per-experiment outputs (``clsuite aggregate``) and the report (``clsuite report``).

Metric names, labels, units and directions come from ``clsuite.metrics`` (``METRICS``, ``QUANTITIES``).
"""
