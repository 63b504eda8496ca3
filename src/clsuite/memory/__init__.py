from clsuite.memory.buffer import Memory
from clsuite.memory.reservoir import Reservoir

__all__ = ["Memory", "Reservoir"]
