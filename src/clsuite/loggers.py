"""Loggers: CSV (default), W&B (offline unless asked) or none.

W&B gets the per-task accuracies as they come, and at the end the accuracy
matrix as a table and a heatmap image; ``wandb.finish()`` runs in a ``finally``
so that every job of a multirun is its own W&B run.
"""

from __future__ import annotations

import contextlib
import os

from omegaconf import OmegaConf


@contextlib.contextmanager
def make_logger(cfg, out_dir):
    kind = cfg.logger.name
    if kind == "none":
        yield None
        return
    if kind == "csv":
        from lightning.pytorch.loggers import CSVLogger

        yield CSVLogger(out_dir, name="csv", version="")
        return
    if kind != "wandb":
        raise ValueError(f"unknown logger {kind!r}; valid: csv, wandb, none")
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    mode = cfg.logger.mode
    os.environ.setdefault("WANDB_SILENT", "true")
    logger = WandbLogger(
        project=cfg.logger.project,
        entity=cfg.logger.get("entity"),
        group=cfg.logger.group,
        tags=list(cfg.logger.tags),
        name=cfg.logger.get("run_name"),
        save_dir=str(out_dir),
        offline=(mode == "offline"),
        mode=mode,
        config=OmegaConf.to_container(cfg, resolve=True),
    )
    try:
        yield logger
        log_matrix(logger, out_dir)
    finally:
        wandb.finish()


def log_matrix(logger, out_dir) -> None:
    """R as a W&B table and a heatmap image, read back from the results file."""
    import json
    from pathlib import Path

    import wandb

    path = Path(out_dir) / "results.json"
    if not path.is_file():
        return
    res = json.loads(path.read_text())
    R = res["R"]
    cols = [f"task{j}" for j in range(len(R[0]))]
    table = wandb.Table(columns=["after", *cols], data=[[f"task{i}", *row] for i, row in enumerate(R)])
    from clsuite.plots import heatmap

    png = heatmap(R, Path(out_dir) / "accuracy_matrix.png", title=f"{res['method']} on {res['benchmark']}")
    logger.experiment.log({"accuracy_matrix": table, "accuracy_matrix_heatmap": wandb.Image(str(png))})
    logger.experiment.summary.update(res["metrics"])
