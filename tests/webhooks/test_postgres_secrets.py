"""PostgreSQL with a password (SCRAM-SHA-256) and TLS (``sslmode=verify-full``), on a server of
the test's own: the parts connect, a wrong password or a refused certificate is refused at start
with the fix named, and the password is in no log line, error, metric or ``asyncsdk inbox``
output, whatever goes wrong."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from inbox_contract import event as stored_event
from own_servers import Certificates, OwnServer, make_certificates, own_postgres
from whtools import HOOK, JSON, TOKEN, encode, event, idle, payload, serve

from asyncsdk import ConfigurationError, PostgresJournal
from asyncsdk.cli import main
from webhooks import (
    InboxUnavailableError,
    PostgresInbox,
    PostgresRegistry,
    TokenVerifier,
    WebhookReceiver,
)

pytestmark = pytest.mark.postgres

PASSWORD = "pw-" + secrets.token_hex(12)
WRONG = "pw-" + secrets.token_hex(12)
METRICS_TOKEN = "scrape-" + "m" * 24


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that did not sign the server's certificate."""
    return make_certificates(tmp_path_factory.mktemp("other-tls")).ca


@pytest.fixture
def server(certificates: Certificates) -> Iterator[OwnServer]:
    with own_postgres(PASSWORD, certificates) as started:
        yield started


def dsn(server: OwnServer, password: str, ca: Path, **query: str) -> str:
    """The server's DSN with ``password``, verifying its certificate against ``ca``."""
    extra = "".join(f"&{key}={value}" for key, value in query.items())
    return (
        f"postgresql://postgres:{password}@localhost:{server.port}/postgres"
        f"?sslmode=verify-full&sslrootcert={ca}{extra}"
    )


def texts(error: BaseException) -> str:
    """What an error shows: its text and repr, and those of every error it came from."""
    shown: list[str] = []
    current: BaseException | None = error
    while current is not None:
        shown += [str(current), repr(current)]
        current = current.__cause__ or current.__context__
    return "\n".join(shown)


async def test_every_part_logs_in_with_scram_over_verified_tls(
    server: OwnServer, certificates: Certificates
) -> None:
    name = "secrets-" + secrets.token_hex(4)
    good = dsn(server, PASSWORD, certificates.ca, application_name=name)
    inbox = PostgresInbox(good, schema="hooks")
    registry = PostgresRegistry(good, schema="hooks")
    journal = await PostgresJournal.connect(good, schema="runs")
    try:
        assert await inbox.put(stored_event("p-1"), b"raw") is True
        await registry.start()
        await registry.resolve(event("p-1"))
        assert (await registry.wait("p-1", timeout=10)).process_id == "p-1"
        conn = await asyncpg.connect(server.url)  # the server's own view of the connections
        try:
            encrypted = await conn.fetch(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)"
                " WHERE a.application_name = $1",
                name,
            )
        finally:
            await conn.close()
        assert len(encrypted) >= 3  # the inbox's pool, the registry's pool and listener, ...
        assert all(row["ssl"] for row in encrypted)
    finally:
        await journal.close()
        await registry.close()
        await inbox.close()


async def test_a_wrong_password_is_refused_at_start_with_the_fix(
    server: OwnServer, certificates: Certificates
) -> None:
    wrong = dsn(server, WRONG, certificates.ca)
    receiver = WebhookReceiver.from_postgres(wrong, verifier=TokenVerifier(TOKEN))
    with pytest.raises(ConfigurationError, match="refused the login") as refused:
        async with serve(receiver):
            pass
    assert "check the user and password of the DSN" in str(refused.value)
    registry = PostgresRegistry(wrong)
    with pytest.raises(ConfigurationError, match="refused the login") as refused:
        await registry.start(timeout=5)
    assert not str(refused.value).endswith("is the server running?")
    assert registry.closed
    with pytest.raises(ConfigurationError, match="login was refused"):
        await PostgresJournal.connect(wrong)


async def test_a_refused_certificate_is_refused_at_start_with_the_fix(
    server: OwnServer, other_ca: Path
) -> None:
    inbox = PostgresInbox(dsn(server, PASSWORD, other_ca))
    try:
        with pytest.raises(ConfigurationError, match=r"TLS certificate .* was refused"):
            await inbox.check()
    finally:
        await inbox.close()
    with pytest.raises(ConfigurationError, match="sslrootcert="):
        await PostgresRegistry(dsn(server, PASSWORD, other_ca)).start(timeout=5)


async def test_the_password_is_in_no_log_error_metric_or_inbox_command(
    server: OwnServer,
    certificates: Certificates,
    other_ca: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    good, wrong = dsn(server, PASSWORD, certificates.ca), dsn(server, WRONG, certificates.ca)
    untrusting = dsn(server, PASSWORD, other_ca)
    errors: list[BaseException] = []
    shown: list[str] = []

    async def cli(*argv: str) -> int:
        code = await asyncio.to_thread(main, list(argv))
        captured = capsys.readouterr()
        shown.extend([captured.out, captured.err])
        return code

    for refused in (wrong, untrusting):
        try:
            await PostgresInbox(refused).check()
        except ConfigurationError as exc:
            errors.append(exc)
        try:
            await PostgresRegistry(refused).start(timeout=5)
        except ConfigurationError as exc:
            errors.append(exc)
        try:
            await PostgresJournal.connect(refused)
        except ConfigurationError as exc:
            errors.append(exc)
        assert await cli("inbox", "stats", "--postgres", refused) == 2  # a usage error

    receiver = WebhookReceiver.from_postgres(
        good,
        verifier=TokenVerifier(TOKEN),
        metrics_route=True,
        metrics_token=METRICS_TOKEN,
        poll_interval=0.05,
    )
    scrape = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with serve(receiver) as client:
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert response.status == 200
        await idle(receiver)
        await cli("inbox", "stats", "--postgres", good)
        server.kill()  # the connections drop
        dropped = await client.post(HOOK, data=encode(payload("p-2")), headers=JSON)
        assert dropped.status == 503
        shown.append(await dropped.text())
        try:
            await receiver.inbox.pending_count()
        except InboxUnavailableError as exc:
            errors.append(exc)
        shown.append(await (await client.get("/hooks/metrics", headers=scrape)).text())
        await cli("inbox", "stats", "--postgres", good)

    assert len(errors) == 7
    assert "webhooks_deliveries" in "".join(shown)
    everything = "\n".join(
        [*map(texts, errors), *shown, caplog.text, *(repr(r.args) for r in caplog.records)]
    )
    assert "refused the login" in everything
    assert PASSWORD not in everything
    assert WRONG not in everything
