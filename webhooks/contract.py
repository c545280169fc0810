"""What a backend author implements, and what the receiver hands such code: the inbox protocols
beyond :class:`~webhooks.Inbox` (claiming, atomic writes, inspection), a shared store's
:class:`Backend` and the result sinks it feeds, the shape of the fetch-back client, and the
service's body parser with its verdicts.

::

    from webhooks.contract import ClaimingInbox, InspectableInbox

    class FileInbox(ClaimingInbox, InspectableInbox): ...

The receiver recognises each protocol with ``isinstance``, so a class need not inherit from
them; it needs their methods, defined on the class.
"""

from webhooks._contract import (
    AtomicInbox,
    Backend,
    ClaimingInbox,
    Ignored,
    InspectableInbox,
    Parsed,
    ProcessClient,
    RegistrySink,
    ResultSink,
)
from webhooks._parse import parse_delivery

__all__ = [
    "AtomicInbox",
    "Backend",
    "ClaimingInbox",
    "Ignored",
    "InspectableInbox",
    "Parsed",
    "ProcessClient",
    "RegistrySink",
    "ResultSink",
    "parse_delivery",
]

for _name in __all__:  # tracebacks, reprs and the reference show the path users import
    vars()[_name].__module__ = __name__
