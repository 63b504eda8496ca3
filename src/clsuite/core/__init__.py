"""The science (docs/DEVELOPING.md): data, memory, replay, methods, models, the learner, the metrics
and the callbacks that make R. It imports nothing from the rest of clsuite (tests/lab/test_architecture.py)."""
