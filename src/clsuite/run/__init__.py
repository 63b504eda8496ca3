"""One run's bookkeeping around the core (docs/DEVELOPING.md, layer "run"): numerics, identity, checkpoints,
loggers, progress, the sealed results file and the records made of them."""
