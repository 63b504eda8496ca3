"""The analysis of results files: tables, figures, verdicts, the report. Its modules and what each
owns: docs/DEVELOPING.md, "Layers, bottom up" (layer "analysis"); metric names, labels, units and directions come from
``clsuite.core.metrics``."""
