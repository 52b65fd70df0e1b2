"""kombu's in-memory transport with ONE broker state per process (the embedded broker).

kombu keeps exchanges and bindings per Transport instance, so a message published on one
connection (a task handing on to the next stage) can find no binding for a queue that the
worker declared on another connection. An in-memory broker exists only inside one process,
so one shared state is its correct meaning.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES, memory
from kombu.transport.virtual.base import BrokerState

# kombu ships py.typed, but BrokerState.__init__ and Transport.__init__ carry no annotations.
_SHARED = BrokerState()  # type: ignore[no-untyped-call]  # kombu: unannotated __init__


class Transport(memory.Transport):
    def __init__(self, client: object, **kwargs: object) -> None:
        super().__init__(client, **kwargs)  # type: ignore[no-untyped-call]  # kombu: unannotated
        self.state = _SHARED


SCHEME = "seatwire-memory"
TRANSPORT_ALIASES[SCHEME] = f"{__name__}:Transport"
BROKER_URL = f"{SCHEME}://"
