"""What a pipeline hands back (`Outcome`), and `scored`, each member scored once with every
value checked finite, which the retrievers' layer defines (garden/retrievers/_scored.py:
the retrieve stage calls it too, and a stage imports nothing of the pipelines)."""
from __future__ import annotations

from dataclasses import dataclass, field

from garden.models import Packet
from garden.retrievers import scored  # noqa: F401  (public here: pipelines and tests import it from here)


@dataclass
class Outcome:
    """A query's packet, the trace its stages wrote and their timings. An entry of the trace
    that costs more to make than the query's other stages, and that only a written trace or
    the explorer reads (every candidate's scores), is `deferred`: made the first time
    `stages` is read. `trace` is what is already there."""
    packet: Packet
    trace: dict = field(default_factory=dict)
    timings_ms: dict = field(default_factory=dict)
    deferred: dict = field(default_factory=dict)   # trace key -> a function that makes its entry

    @property
    def stages(self) -> dict:
        """The whole trace, the deferred entries made now (once)."""
        while self.deferred:
            key = next(iter(self.deferred))
            self.trace[key] = self.deferred.pop(key)()
        return self.trace
