"""Hydra instantiates launchers only from classes defined in the ``hydra_plugins`` namespace:
this module declares clsuite's joblib launcher there (``conf/launcher/joblib.yaml``); the code
is ``clsuite.launcher``."""

from clsuite import launcher


class JoblibLauncher(launcher.JoblibLauncher):
    """``clsuite.launcher.JoblibLauncher`` (a worker killed by the kernel ends only its job)."""
