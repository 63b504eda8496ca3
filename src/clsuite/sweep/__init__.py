"""Sweeps (Hydra multiruns), one module per concern: ``job``, ``index``, ``grid``, ``summary``, ``callback`` (the
Hydra callback that ties them together), ``gpus``, ``locks``, ``launcher`` (docs/DEVELOPING.md, layer "sweep")."""
