"""What an operator reads of a stored event: its names (``asyncsdk inbox dead``) and its log line,
each event saying its own."""

from __future__ import annotations

from asyncsdk import ProcessCompleted
from webhooks import WebhookEvent, describe_event


def test_a_process_completed_event_names_its_process_status_and_tool() -> None:
    event = ProcessCompleted(
        event="process.completed", process_id="p-1", order_id="o-1", tool="t", status="done"
    )
    assert describe_event(event) == {"process_id": "p-1", "status": "done", "tool": "t"}
    assert event.summary == "process p-1 (done)"


def test_another_senders_event_names_its_message_id_and_type() -> None:
    event = WebhookEvent(id="msg_1", type="invoice.paid", timestamp=1, data={}, raw=b"{}")
    assert describe_event(event) == {"message_id": "msg_1", "type": "invoice.paid"}
    assert event.summary == "message msg_1 (invoice.paid)"
