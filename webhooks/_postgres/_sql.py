"""The SQL of the PostgreSQL backends: the schema, and every statement the inbox and registry run.

All in one schema (``webhooks`` unless configured): the inbox table, whose unique ``dedup_key``
is the dedup claim, and the registry's results table.  Times are the server's clock, so that
processes on several hosts agree on what is due and which claims have lapsed.  Statements take
their values as parameters; only the schema name (checked, then quoted) is put into the text.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LOCK_SCHEMA", "InboxSQL", "RegistrySQL", "channel", "schema_ddl"]

PENDING: Final = "pending"
DONE: Final = "done"
DEAD: Final = "dead"

LOCK_SCHEMA: Final = "SELECT pg_advisory_xact_lock(hashtext($1))"


def _quoted(schema: str) -> str:
    return '"' + schema.replace('"', '""') + '"'


#: Room left in each page for a claim's new row version, so that a claim (which changes no
#: indexed column) is a heap-only update and adds no index entries.
_FILLFACTOR: Final = 90
#: Dead row versions after which autovacuum cleans the inbox, however many finished rows it
#: retains.  Every event leaves dead versions in the small index of pending rows, which claims
#: scan from its oldest end; PostgreSQL's default (20 % of the table) would let a million retained
#: keys hold two hundred thousand of them between cleanings, and claims slow down to milliseconds.
_VACUUM_EVERY: Final = 10_000


def schema_ddl(schema: str) -> str:
    s = _quoted(schema)
    return f"""
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.inbox (
    id bigserial PRIMARY KEY,
    dedup_key text NOT NULL UNIQUE,
    event bytea NOT NULL,
    raw bytea NOT NULL,
    state text NOT NULL DEFAULT '{PENDING}',
    attempts integer NOT NULL DEFAULT 0,
    last_error text,
    received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    due_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed_by text,
    claimed_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS inbox_due ON {s}.inbox (due_at, id) WHERE state = '{PENDING}';
CREATE INDEX IF NOT EXISTS inbox_dead ON {s}.inbox (id) WHERE state = '{DEAD}';
CREATE INDEX IF NOT EXISTS inbox_done ON {s}.inbox (finished_at) WHERE state = '{DONE}';
ALTER TABLE {s}.inbox SET (
    fillfactor = {_FILLFACTOR},
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = {_VACUUM_EVERY},
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = {_VACUUM_EVERY}
);
CREATE TABLE IF NOT EXISTS {s}.counts (
    name text PRIMARY KEY,
    n bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.results (
    process_id text PRIMARY KEY,
    event bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
"""


SERVER_STARTED: Final = "SELECT pg_postmaster_start_time()"
"""When the server a connection reached started: another one after a failover."""


def channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel on which the registry announces results."""
    return f"{schema}.results"


class InboxSQL:
    """The inbox's statements for one schema."""

    def __init__(self, schema: str) -> None:
        t = f"{_quoted(schema)}.inbox"
        counts = f"{_quoted(schema)}.counts"
        entry = "id, event, raw, attempts, last_error, extract(epoch FROM received_at)::float8"
        # Rows of distinct keys, given as four arrays (the last: the consumer a row is handed
        # to at once, or NULL): a new key inserts; a finished key past its retention ($4
        # seconds) is taken again; any other held key returns no row (a duplicate).  Concurrent
        # puts of one key wait for the first one's commit, so exactly one of them gets a row.
        self.put = (
            f"INSERT INTO {t} AS t (dedup_key, event, raw, claimed_by, claimed_at, attempts)"
            " SELECT k, e, r, c, CASE WHEN c IS NULL THEN NULL ELSE clock_timestamp() END,"
            " CASE WHEN c IS NULL THEN 0 ELSE 1 END"
            " FROM unnest($1::text[], $2::bytea[], $3::bytea[], $5::text[]) AS u (k, e, r, c)"
            " ON CONFLICT (dedup_key) DO UPDATE SET event = EXCLUDED.event, raw = EXCLUDED.raw,"
            f" state = '{PENDING}', attempts = EXCLUDED.attempts, last_error = NULL,"
            " received_at = clock_timestamp(), due_at = clock_timestamp(),"
            " claimed_by = EXCLUDED.claimed_by, claimed_at = EXCLUDED.claimed_at,"
            " finished_at = NULL"
            f" WHERE t.state = '{DONE}'"
            " AND t.finished_at < clock_timestamp() - make_interval(secs => $4)"
            " RETURNING dedup_key, id, extract(epoch FROM received_at)::float8"
        )
        # Oldest due first; rows another consumer is claiming or acking right now are skipped
        # rather than waited for.  A claim older than $3 seconds counts as abandoned.
        self.claim = (
            f"WITH due AS (SELECT id FROM {t} WHERE state = '{PENDING}'"
            " AND due_at <= clock_timestamp() AND (claimed_by IS NULL"
            " OR claimed_at <= clock_timestamp() - make_interval(secs => $3))"
            " ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)"
            f" UPDATE {t} AS t SET claimed_by = $1, claimed_at = clock_timestamp(),"
            " attempts = t.attempts + 1 FROM due WHERE t.id = due.id"
            " RETURNING t.id, t.event, t.raw, t.attempts, t.last_error,"
            " extract(epoch FROM t.received_at)::float8"
        )
        # A row locked by an ack or a take-over is being settled: renewing it can wait for the
        # next beat, and the other rows need not wait for it.
        self.extend = (
            f"UPDATE {t} SET claimed_at = clock_timestamp() WHERE id IN (SELECT id FROM {t}"
            f" WHERE id = ANY($2::bigint[]) AND claimed_by = $1 AND state = '{PENDING}'"
            " FOR UPDATE SKIP LOCKED)"
        )
        # The row stays, without its bodies, to hold the dedup key for the retention.
        self.ack = (
            f"UPDATE {t} SET state = '{DONE}', finished_at = clock_timestamp(), claimed_by = NULL,"
            " claimed_at = NULL, event = ''::bytea, raw = ''::bytea"
            f" WHERE id = ANY($1::bigint[]) AND state <> '{DONE}'"
        )
        self.hold = (
            f"SELECT id FROM {t} WHERE id = $1 AND state = '{PENDING}' AND claimed_by = $2"
            " FOR UPDATE"
        )
        self.retry_later = (
            f"UPDATE {t} SET claimed_by = NULL, claimed_at = NULL, last_error = $2,"
            " due_at = clock_timestamp() + make_interval(secs => $3)"
            f" WHERE id = $1 AND state = '{PENDING}'"
        )
        self.dead_letter = (
            f"UPDATE {t} SET state = '{DEAD}', claimed_by = NULL, claimed_at = NULL,"
            " last_error = $2, finished_at = clock_timestamp()"
            f" WHERE id = $1 AND state = '{PENDING}'"
        )
        self.dead_letters = f"SELECT {entry} FROM {t} WHERE state = '{DEAD}' ORDER BY id LIMIT $1"
        # Counted in the same statement, for the metrics of every receiver on the inbox.
        self.replay = (
            f"WITH replayed AS (UPDATE {t} SET state = '{PENDING}', attempts = 0,"
            " due_at = clock_timestamp(), finished_at = NULL"
            f" WHERE id = $1 AND state = '{DEAD}' RETURNING id),"
            f" counted AS (INSERT INTO {counts} AS c (name, n)"
            " SELECT 'replayed', count(*) FROM replayed HAVING count(*) > 0"
            " ON CONFLICT (name) DO UPDATE SET n = c.n + EXCLUDED.n)"
            " SELECT id FROM replayed"
        )
        self.pending_count = f"SELECT count(*) FROM {t} WHERE state = '{PENDING}'"
        # Each figure from the partial index of its own state, never a scan of the finished rows
        # kept for their dedup keys: the receiver's metrics read it every 2 s.
        self.stats = (
            f"SELECT (SELECT count(*) FROM {t} WHERE state = '{PENDING}'),"
            " extract(epoch FROM clock_timestamp()"
            f" - (SELECT min(received_at) FROM {t} WHERE state = '{PENDING}'))::float8,"
            f" (SELECT count(*) FROM {t} WHERE state = '{DEAD}'),"
            f" coalesce((SELECT n FROM {counts} WHERE name = 'replayed'), 0),"
            f" coalesce((SELECT n FROM {counts} WHERE name = 'lost'), 0),"
            f" (SELECT n FROM {counts} WHERE name = 'lost_at')"
        )
        # Losses found after a failover (webhooks._postgres._losses): which of the ids a node
        # answered are still here, and the count and time (Unix seconds) of what was not.
        self.present = f"SELECT id FROM {t} WHERE id = ANY($1::bigint[])"
        self.count_lost = (
            f"INSERT INTO {counts} AS c (name, n) VALUES ('lost', $1), ('lost_at', $2)"
            " ON CONFLICT (name) DO UPDATE SET"
            " n = CASE WHEN c.name = 'lost' THEN c.n + EXCLUDED.n ELSE EXCLUDED.n END"
        )
        self.purge_dead = (
            f"UPDATE {t} SET state = '{DONE}', finished_at = clock_timestamp(),"
            " event = ''::bytea, raw = ''::bytea"
            f" WHERE id = $1 AND state = '{DEAD}' RETURNING id"
        )
        self.check = f"SELECT 1 FROM {t} LIMIT 1"
        self.exists = "SELECT to_regclass(format('%I.inbox', $1::text)) IS NOT NULL"
        self.purge = (
            f"DELETE FROM {t} WHERE state = '{DONE}'"
            " AND finished_at < clock_timestamp() - make_interval(secs => $1)"
        )


class RegistrySQL:
    """The registry's statements for one schema."""

    def __init__(self, schema: str) -> None:
        t = f"{_quoted(schema)}.results"
        # The first event of a process id wins while it is kept ($3 seconds); when it is stored,
        # its process id is announced on the channel ($4) as the transaction commits.
        self.resolve = (
            f"WITH stored AS (INSERT INTO {t} AS r (process_id, event, expires_at)"
            " VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3))"
            " ON CONFLICT (process_id) DO UPDATE SET event = EXCLUDED.event,"
            " expires_at = EXCLUDED.expires_at WHERE r.expires_at <= clock_timestamp()"
            " RETURNING process_id)"
            " SELECT count(*) FROM stored, LATERAL pg_notify($4, stored.process_id)"
        )
        self.read = (
            f"SELECT event FROM {t} WHERE process_id = ANY($1::text[])"
            " AND expires_at > clock_timestamp()"
        )
        self.purge = f"DELETE FROM {t} WHERE expires_at <= clock_timestamp()"
