"""Metrics and tracing are optional extras: without them nothing is imported, and asking for
them names the extra to install.  Each check runs in a fresh interpreter, so that what the rest of
the suite imported does not count."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_client_and_a_receiver_without_telemetry_import_neither_library() -> None:
    done = run(
        """
        import sys
        from asyncsdk import Client
        from webhooks import MemoryInbox, TokenVerifier, WebhookReceiver

        Client(api_key="k" * 20, base_url="http://127.0.0.1:1")
        WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier("t" * 32))
        optional = {"prometheus_client", "opentelemetry"}
        print(sorted(m for m in sys.modules if m.split(".")[0] in optional))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("blocked", "setting", "extra"),
    [
        ("prometheus_client", "ClientTelemetry(metrics=True)", "metrics"),
        ("opentelemetry", "ClientTelemetry(tracing=True)", "tracing"),
        ("prometheus_client", "ReceiverTelemetry(metrics=True)", "metrics"),
        ("opentelemetry", "ReceiverTelemetry(tracing=True)", "tracing"),
    ],
)
def test_asking_without_the_extra_names_it(blocked: str, setting: str, extra: str) -> None:
    done = run(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if the package were not installed
        from asyncsdk import ClientTelemetry, ConfigurationError
        from webhooks import ReceiverTelemetry
        try:
            {setting}
        except ConfigurationError as exc:
            print(exc)
        """
    )
    assert done.returncode == 0, done.stderr
    assert f"pip install 'asyncsdk[{extra}]'" in done.stdout
