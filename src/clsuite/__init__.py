"""A Hydra + Lightning suite for online class-incremental continual learning."""
