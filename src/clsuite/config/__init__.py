"""The configuration (docs/DEVELOPING.md, layer "config"): the key declarations and their check
(``schema``, ``check``), composing (``compose``), ``--help`` (``help``), where things live (``home``, ``paths``)."""
