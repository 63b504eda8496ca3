"""One run's bookkeeping around the core (docs/ARCHITECTURE.md, layer "run"): numerics, identity, checkpoints,
loggers, progress, the sealed results file and the records made of them."""
