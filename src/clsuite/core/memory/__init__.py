from clsuite.core.memory.buffer import Memory
from clsuite.core.memory.reservoir import Reservoir

__all__ = ["Memory", "Reservoir"]
