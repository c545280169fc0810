"""What operators read of a receiver, in one place.

``counters``: the counts and the ack-latency histogram every receiver keeps (in process, no
dependencies: :class:`~webhooks.Metrics`).  ``telemetry``: the Prometheus metrics and
OpenTelemetry spans a :class:`~webhooks.ReceiverTelemetry` turns on, and when the request path
and the workers report them.  ``exposition``: Prometheus' view, read at scrape time (the
collector, the metrics route, :func:`~webhooks.metrics_app`).  ``store_gauges``: the shared
inbox's figures, read from the store every few seconds for the gauges.
"""
