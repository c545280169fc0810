"""The endpoints of the service, grouped as ``client.projects``, ``.orders``, ``.processes``,
``.tools`` and ``.v1``, one module each; ``waiting.py`` waits for a process's result.

A resource method checks its arguments (``ValidationError`` before anything is sent), builds a
:class:`~asyncsdk._protocol.Request`, and hands it with a decoder to the one transport through
:class:`Core`.  Decoders (``_protocol/responses.py``) turn the JSON value, envelope removed, into
models with the client's converter.
"""

from asyncsdk._resources.core import Core, TimeoutArg
from asyncsdk._resources.orders import Orders
from asyncsdk._resources.processes import Processes
from asyncsdk._resources.projects import Projects
from asyncsdk._resources.tools import Tools
from asyncsdk._resources.v1 import V1
from asyncsdk._resources.waiting import ResultWaiter

__all__ = [
    "V1",
    "Core",
    "Orders",
    "Processes",
    "Projects",
    "ResultWaiter",
    "TimeoutArg",
    "Tools",
]
