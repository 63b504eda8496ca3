"""Hydra instantiates launchers only from classes defined in the ``hydra_plugins`` namespace:
this module declares clsuite's basic and joblib launchers there (``conf/launcher/basic.yaml``,
``joblib.yaml``); the code is ``clsuite.sweep.launcher``."""

from clsuite.sweep import launcher


class BasicLauncher(launcher.BasicLauncher):
    """``clsuite.sweep.launcher.BasicLauncher`` (a job folder that cannot be written ends only its job)."""


class JoblibLauncher(launcher.JoblibLauncher):
    """``clsuite.sweep.launcher.JoblibLauncher`` (a worker killed by the kernel ends only its job)."""
