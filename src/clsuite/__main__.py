"""``python -m clsuite [verb] ...`` = the ``clsuite`` command (clsuite.commands), with this interpreter."""

from clsuite.commands import main

main()
