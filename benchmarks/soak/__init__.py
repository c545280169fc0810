"""Soak: webhook deliveries through three receiver processes on one Redis, one of them killed.

::

    .venv/bin/python -m benchmarks.soak [--events N] [--concurrency C] [--redis URL]
                                        [--out benchmarks/SOAK.md] [--json PATH] [--no-report]

``N`` deliveries (default 100,000): 65 % new valid events, 30 % duplicates of them (with re-signed
result URLs, as the service sends), 5 % malformed.  Three receiver processes (this module run as
``python -m benchmarks.soak node ...``) share a :class:`~webhooks.RedisInbox` and a
:class:`~webhooks.RedisRegistry` under one key prefix; a load balancer (the generator here)
spreads deliveries over the live ones and, like the service, retries a delivery on any non-2xx or
broken connection.  When a third of the deliveries are acknowledged one process gets SIGKILL; at
two thirds it is started again.

The handler is an ``atomic=True`` one: it queues ``HINCRBY <prefix>soak:calls <process_id> 1`` on
its :class:`~webhooks.RedisWrites`, which the inbox applies in the same script as the ack, so a
call counts only once its effect is committed.  It also notes each run as it starts, outside that
step (``<prefix>soak:runs``, and the process that ran it first in ``<prefix>soak:first``), so after
the inbox has drained:

* **lost**: valid events acknowledged (or never acknowledged) but never handled (must be 0);
* **handler calls per valid event** (committed effects): exactly 1 (must be);
* **handler runs per valid event**: 1, except for an entry whose handler ran in the killed process
  before its ack: it runs again elsewhere (at least once delivery), at most ``workers`` of them,
  all first run by the killed process, and the killed run's writes were never applied;
* no handler call for a malformed delivery, no dead letter, every waiter resolved;
* the load held (deliveries per second, generator to last acknowledgement), and the ack latency
  seen by the sender (p50, p99) and by the receivers (their own histogram).
"""

from __future__ import annotations
