"""The error of bad input: a ``ConfigError`` is one line naming the bad value and the valid choices;
the command line prints it as ``error: ...`` and exits with status 2 before any training (a leaf:
every layer may raise it)."""


class ConfigError(ValueError):
    pass
