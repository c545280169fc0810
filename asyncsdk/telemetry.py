"""What the ``metrics=`` and ``tracing=`` arguments of telemetry accept, in one place.

:class:`asyncsdk.ClientTelemetry` and ``webhooks.ReceiverTelemetry`` both take them, and so may
telemetry of your own that should read them the same way:

- ``metrics``: ``True`` for a new ``prometheus_client.CollectorRegistry``, a registry of yours,
  or ``False`` for none (the ``metrics`` extra);
- ``tracing``: ``True`` for the global OpenTelemetry tracer provider, a provider of yours, or
  ``False`` for none (the ``tracing`` extra).

Either package is imported only when asked for; a missing one, or a value of another kind, is a
:class:`~asyncsdk.ConfigurationError` that names the fix.
"""

from asyncsdk._telemetry import load_registry, load_tracer

__all__ = ["load_registry", "load_tracer"]
