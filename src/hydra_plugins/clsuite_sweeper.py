"""``hydra.sweeper`` (conf/config.yaml): Hydra's basic sweeper, without composing every job twice
before the first starts.

Hydra's ``BasicSweeper.sweep`` calls ``validate_batch_is_legal`` on each batch: it composes every
job's config (``load_sweep_config``) in the sweep's process, one after the other, before handing
the batch to the launcher, which composes each job again where it runs. For Table II (280 jobs)
that check took about 20 s of a 9-minute sweep on two cores, with no worker started yet
(measured 2026-11-26: 23 s from ``grid.json`` to the first finished job of a sweep whose 280 jobs
were all skipped, 52 s in all; 28 s without the check).

``clsuite.sweep.SweepCallback`` has by then composed and validated every job of the grid against
the schema (``clsuite.sweep.grid.validate_grid``: a stricter check, one ``error:`` line and exit 2
before ``grid.json``). So a batch whose every job passed that check in this process goes straight
to the launcher; any other batch (a sweep the callback did not check) gets Hydra's own check,
unchanged. Everything else is Hydra's ``BasicSweeper``: the same
expansion, order, batches and launcher calls.

The class is defined here, not in ``clsuite``: Hydra's plugin scan re-executes the modules of
``hydra._internal.core_plugins`` and then of ``hydra_plugins``, so a subclass defined here is
always built on the scanned ``BasicSweeper`` (whose ``__init__`` names its module's class).
"""

from collections.abc import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper as _HydraBasicSweeper

from clsuite.sweep.grid import was_validated


class BasicSweeper(_HydraBasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        if was_validated(batch):
            return  # composed and validated by the sweep's callback (clsuite.sweep.grid.validate_grid)
        super().validate_batch_is_legal(batch)
