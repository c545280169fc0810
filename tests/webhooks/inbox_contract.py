"""The :class:`webhooks.Inbox` contract as tests, run against every backend.

A backend's test module subclasses :class:`InboxContract` (the name does not start with ``Test``, so
it is not collected on its own), or :class:`ClaimingInboxContract` for an inbox that is also a
:class:`webhooks.contract.ClaimingInbox` (as every inbox of the package is), and provides an
``inbox`` fixture yielding a fresh, empty inbox whose ``claim_timeout`` is ``CLAIM_TIMEOUT``::

    class TestMemoryInbox(ClaimingInboxContract):
        @pytest.fixture
        async def inbox(self) -> AsyncIterator[Inbox]:
            yield MemoryInbox(claim_timeout=CLAIM_TIMEOUT)

A backend several processes can share also subclasses :class:`SharedInboxContract`, whose
``open_inbox`` fixture opens another inbox on the same fresh store (each standing for another
process) with ``claim_timeout`` ``CLAIM_TIMEOUT``, all closed after the test.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from typing import Any, Final, Protocol

import attrs
import pytest
from whtools import HOOK, JSON, encode, event, eventually, make_receiver, payload, serve, wait_until

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import Inbox, InboxEntry, InboxUnavailableError, UnknownEntryError
from webhooks.contract import ClaimingInbox, InspectableInbox

CLAIM_TIMEOUT: Final = 0.3


async def claim_eventually(inbox: Inbox, consumer: str, limit: int = 10) -> list[InboxEntry]:
    """Claim until something is handed out (used where a claim has to time out first)."""

    async def claim() -> list[InboxEntry]:
        return await inbox.claim_batch(consumer, limit)

    return await eventually(claim, "an abandoned claim to be handed out again")


class InboxContract:
    async def test_a_receiver_on_it_runs_each_events_handler_once(self, inbox: Inbox) -> None:
        handled: list[str] = []
        receiver = make_receiver(inbox)

        @receiver.on_completed()
        async def record(completed: ProcessCompleted) -> None:
            handled.append(completed.process_id)

        async with serve(receiver) as client:
            answers = []
            for _ in range(2):  # the service delivering again, as it may
                response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
                answers.append(await response.json())
            assert answers == [{"status": "accepted"}, {"status": "duplicate"}]
            await wait_until(lambda: receiver.metrics.processed == 1, "the handler run")

            async def acked() -> bool:
                return await inbox.pending_count() == 0

            await eventually(acked, "the ack to reach the store")
        assert handled == ["p-1"]

    async def test_put_stores_once_per_dedup_key(self, inbox: Inbox) -> None:
        assert await inbox.put(event(src="u1"), b"first") is True
        # Same (event, process_id, status), different body: a duplicate (URLs are re-signed).
        assert await inbox.put(event(src="u2"), b"second") is False
        assert await inbox.put(event(status="failed"), b"third") is True
        assert await inbox.put(event("p-2"), b"fourth") is True
        assert await inbox.pending_count() == 3

    async def test_the_longest_dedup_key_a_delivery_can_bring_is_stored(self, inbox: Inbox) -> None:
        # Ids of 200 characters (the receiver refuses longer ones) of 4 bytes each in UTF-8 (CJK
        # Extension B, drawn at random so that no store can compress them), in the form
        # fetch-back stores an unconfirmed delivery in: its ``event`` holds the order id too.
        longest = "".join(map(chr, random.Random(200).sample(range(0x20000, 0x2A6D0), 200)))
        marked = json.dumps(["unconfirmed", "process.completed", longest], ensure_ascii=False)
        widest = attrs.evolve(event(longest, status=longest), event=marked, order_id=longest)
        assert await inbox.put(widest, b"x") is True
        assert await inbox.put(widest, b"x") is False
        (entry,) = await inbox.claim_batch("c1", 10)
        assert entry.event == widest

    async def test_concurrent_puts_of_one_key_store_exactly_one(self, inbox: Inbox) -> None:
        results = await asyncio.gather(*(inbox.put(event(), b"x") for _ in range(50)))
        assert results.count(True) == 1
        assert await inbox.pending_count() == 1

    async def test_a_submitted_put_stores_even_if_its_caller_stops_waiting(
        self, inbox: Inbox
    ) -> None:
        answer = inbox.submit_put(event("p-1"), b"x")
        answer.cancel()  # a client that hung up, or the receiver's put_timeout
        duplicate = inbox.submit_put(event("p-1"), b"x")
        assert await duplicate is False  # the first write went ahead all the same
        assert await inbox.submit_put(event("p-2"), b"y") is True
        assert await inbox.pending_count() == 2

    async def test_claim_hands_out_entries_with_their_event_and_raw_body(
        self, inbox: Inbox
    ) -> None:
        await inbox.put(event("p-1"), b'{"raw": 1}')
        await inbox.put(event("p-2"), b'{"raw": 2}')
        batch = await inbox.claim_batch("c1", 10)
        assert [e.event.process_id for e in batch] == ["p-1", "p-2"]
        assert batch[0].event == event("p-1")
        assert batch[0].raw == b'{"raw": 1}'
        assert [e.attempts for e in batch] == [1, 1]
        assert batch[0].received_at > 0
        # Claimed entries are not handed out again while the claim holds.
        assert await inbox.claim_batch("c2", 10) == []

    async def test_claim_respects_the_limit(self, inbox: Inbox) -> None:
        for n in range(5):
            await inbox.put(event(f"p-{n}"), b"x")
        first = await inbox.claim_batch("c1", 2)
        second = await inbox.claim_batch("c1", 10)
        assert len(first) == 2
        assert len(second) == 3
        assert not {e.id for e in first} & {e.id for e in second}

    async def test_acked_entries_are_gone_but_their_key_stays_claimed(self, inbox: Inbox) -> None:
        await inbox.put(event(), b"x")
        (entry,) = await inbox.claim_batch("c1", 10)
        await inbox.ack(entry.id)
        await inbox.ack(entry.id)  # idempotent
        assert await inbox.pending_count() == 0
        assert await claim_none(inbox)
        assert await inbox.put(event(), b"x") is False

    async def test_ack_many_acks_each_and_skips_unknown_ids(self, inbox: Inbox) -> None:
        for n in range(4):
            await inbox.put(event(f"p-{n}"), b"x")
        batch = await inbox.claim_batch("c1", 10)
        await inbox.ack_many([batch[0].id, "424242", batch[2].id, batch[0].id])
        await inbox.ack_many([])
        assert await inbox.pending_count() == 2
        await inbox.retry_later(batch[1].id, "again", 0)
        await inbox.retry_later(batch[0].id, "acked: ignored", 0)
        assert [e.id for e in await inbox.claim_batch("c2", 10)] == [batch[1].id]
        assert await inbox.put(event("p-2"), b"x") is False  # an acked key stays claimed

    async def test_abandoned_claims_are_handed_out_again(self, inbox: Inbox) -> None:
        await inbox.put(event(), b"x")
        (entry,) = await inbox.claim_batch("crashed", 10)
        (again,) = await claim_eventually(inbox, "survivor")
        assert again.id == entry.id
        assert again.attempts == 2
        assert await inbox.dead_letters() == []

    async def test_extend_keeps_a_claim_alive(self, inbox: Inbox) -> None:
        await inbox.put(event(), b"x")
        (entry,) = await inbox.claim_batch("slow", 10)
        for _ in range(4):
            await asyncio.sleep(CLAIM_TIMEOUT / 4)
            await inbox.extend("slow", [entry.id])
            assert await inbox.claim_batch("other", 10) == []
        # Someone else's extend does not count.
        await inbox.extend("other", [entry.id])

    async def test_attempts_count_every_hand_out(self, inbox: Inbox) -> None:
        await inbox.put(event(), b"x")
        (entry,) = await inbox.claim_batch("c1", 10)
        await inbox.retry_later(entry.id, "boom", 0)
        (entry,) = await inbox.claim_batch("c1", 10)
        assert entry.attempts == 2
        assert entry.last_error == "boom"

    async def test_bad_arguments_are_refused_and_change_nothing(self, inbox: Inbox) -> None:
        await inbox.put(event(), b"x")
        bad_claims: list[tuple[Any, Any]] = [("", 10), (None, 10), ("c1", -1), ("c1", True)]
        for consumer, limit in bad_claims:
            with pytest.raises(ConfigurationError, match=r"(consumer|limit) must"):
                await inbox.claim_batch(consumer, limit)
        (entry,) = await inbox.claim_batch("c1", 10)
        assert entry.attempts == 1
        bad_delays: list[Any] = [-1, math.nan, math.inf, True, "5"]
        for delay in bad_delays:
            with pytest.raises(ConfigurationError, match="delay must"):
                await inbox.retry_later(entry.id, "later", delay)
        # The entry is still held by c1: nothing was released.
        assert await inbox.claim_batch("c2", 10) == []
        assert await inbox.pending_count() == 1

    async def test_retry_later_delays_the_entry(self, inbox: Inbox) -> None:
        await inbox.put(event(), b"x")
        (entry,) = await inbox.claim_batch("c1", 10)
        await inbox.retry_later(entry.id, "later", 3600)
        assert await inbox.claim_batch("c1", 10) == []
        assert await inbox.pending_count() == 1

    async def test_dead_letters_are_parked_listed_and_replayed(self, inbox: Inbox) -> None:
        await inbox.put(event("p-1"), b"one")
        await inbox.put(event("p-2"), b"two")
        batch = await inbox.claim_batch("c1", 10)
        for entry in batch:
            await inbox.dead_letter(entry.id, f"gave up on {entry.event.process_id}")
        assert await inbox.pending_count() == 0
        assert await inbox.claim_batch("c1", 10) == []
        dead = await inbox.dead_letters()
        assert [(d.event.process_id, d.last_error) for d in dead] == [
            ("p-1", "gave up on p-1"),
            ("p-2", "gave up on p-2"),
        ]
        assert dead[0].raw == b"one"
        assert [d.attempts for d in dead] == [1, 1]
        assert len(await inbox.dead_letters(limit=1)) == 1
        # A dead letter still holds its key.
        assert await inbox.put(event("p-1"), b"again") is False

        await inbox.replay(dead[0].id)
        assert [d.id for d in await inbox.dead_letters()] == [dead[1].id]
        (entry,) = await inbox.claim_batch("c1", 10)
        assert entry.id == dead[0].id
        assert entry.attempts == 1  # reset by replay, then this hand-out

    async def test_replay_of_a_non_dead_entry_is_refused(self, inbox: Inbox) -> None:
        await inbox.put(event(), b"x")
        (entry,) = await inbox.claim_batch("c1", 10)
        with pytest.raises(UnknownEntryError):
            await inbox.replay(entry.id)
        with pytest.raises(UnknownEntryError):
            await inbox.replay("999999")

    async def test_the_store_counts_replays(self, inbox: Inbox) -> None:
        assert isinstance(inbox, InspectableInbox)
        assert (await inbox.stats()).replayed == 0
        for pid in ("p-1", "p-2"):
            await inbox.put(event(pid), b"x")
        for entry in await inbox.claim_batch("c1", 10):
            await inbox.dead_letter(entry.id, "gave up")
        first, second = await inbox.dead_letters()
        await inbox.replay(first.id)
        with pytest.raises(UnknownEntryError):
            await inbox.replay(first.id)  # refused: not counted
        await inbox.replay(second.id)
        assert (await inbox.stats()).replayed == 2

    async def test_stats_count_depth_age_and_dead_letters(self, inbox: Inbox) -> None:
        assert isinstance(inbox, InspectableInbox)
        empty = await inbox.stats()
        assert (empty.depth, empty.oldest_age, empty.dead) == (0, None, 0)
        await inbox.put(event("p-1"), b"one")
        await asyncio.sleep(0.05)
        await inbox.put(event("p-2"), b"two")
        await inbox.put(event("p-3"), b"three")
        first, *_ = await inbox.claim_batch("c1", 1)
        await inbox.dead_letter(first.id, "gave up")
        stats = await inbox.stats()
        assert (stats.depth, stats.dead) == (2, 1)
        # The oldest unfinished entry is p-2, stored after the dead one.
        assert stats.oldest_age is not None
        assert 0.0 <= stats.oldest_age < 0.05 + 5.0

    async def test_purge_drops_a_dead_letter_and_keeps_its_key(self, inbox: Inbox) -> None:
        assert isinstance(inbox, InspectableInbox)
        await inbox.put(event("p-1"), b"one")
        (entry,) = await inbox.claim_batch("c1", 10)
        with pytest.raises(UnknownEntryError):
            await inbox.purge(entry.id)  # not a dead letter
        await inbox.dead_letter(entry.id, "gave up")
        await inbox.purge(entry.id)
        assert await inbox.dead_letters() == []
        assert (await inbox.stats()).dead == 0
        assert await inbox.put(event("p-1"), b"again") is False  # still a duplicate
        with pytest.raises(UnknownEntryError):
            await inbox.replay(entry.id)
        with pytest.raises(UnknownEntryError):
            await inbox.purge(entry.id)

    async def test_unknown_ids_are_ignored(self, inbox: Inbox) -> None:
        await inbox.put(event("p-1"), b"one")
        (entry,) = await inbox.claim_batch("c1", 10)
        # An id this inbox never gave out (an entry another node already finished, say) raises
        # nothing and touches nothing: the one real entry is neither finished nor dead.
        await inbox.ack("424242")
        await inbox.ack_many(["424242"])
        await inbox.retry_later("424242", "x", 0)
        await inbox.dead_letter("424242", "x")
        await inbox.extend("c1", ["424242"])
        assert await inbox.pending_count() == 1
        assert await inbox.dead_letters() == []
        await inbox.ack(entry.id)
        assert await inbox.pending_count() == 0
        assert await inbox.put(event("p-1"), b"again") is False  # its key is still taken

    async def test_check_passes_and_close_is_final(self, inbox: Inbox) -> None:
        await inbox.check()
        await inbox.put(event(), b"x")
        await inbox.close()
        await inbox.close()
        with pytest.raises(InboxUnavailableError):
            await inbox.put(event("p-2"), b"x")


async def claim_none(inbox: Inbox) -> bool:
    return await inbox.claim_batch("anyone", 10) == []


class ClaimingInboxContract(InboxContract):
    """The contract of an inbox that also stores and hands out in one step
    (:class:`webhooks.contract.ClaimingInbox`)."""

    async def test_a_claimed_put_hands_out_the_new_entry(self, inbox: Inbox) -> None:
        assert isinstance(inbox, ClaimingInbox)
        entry = await inbox.submit_put_claimed(event("p-1"), b'{"raw": 1}', "c1")
        assert entry is not None
        assert entry.event == event("p-1")
        assert entry.raw == b'{"raw": 1}'
        assert entry.attempts == 1
        assert entry.received_at > 0
        assert await inbox.pending_count() == 1
        # Held by c1: nobody else is handed it while the claim holds; c1 can renew and ack it.
        assert await inbox.claim_batch("c2", 10) == []
        await inbox.extend("c1", [entry.id])
        await inbox.ack(entry.id)
        assert await inbox.pending_count() == 0
        assert await inbox.put(event("p-1"), b"x") is False

    async def test_a_claimed_put_of_a_duplicate_stores_and_hands_out_nothing(
        self, inbox: Inbox
    ) -> None:
        assert isinstance(inbox, ClaimingInbox)
        assert await inbox.put(event("p-1"), b"x") is True
        assert await inbox.submit_put_claimed(event("p-1"), b"again", "c1") is None
        assert await inbox.pending_count() == 1
        (entry,) = await inbox.claim_batch("c2", 10)
        assert entry.raw == b"x"
        assert entry.attempts == 1

    async def test_a_claimed_put_is_handed_out_again_when_its_claim_lapses(
        self, inbox: Inbox
    ) -> None:
        assert isinstance(inbox, ClaimingInbox)
        entry = await inbox.submit_put_claimed(event("p-1"), b"x", "crashed")
        assert entry is not None
        (again,) = await claim_eventually(inbox, "survivor")
        assert again.id == entry.id
        assert again.attempts == 2

    async def test_a_claimed_put_goes_ahead_if_its_caller_stops_waiting(self, inbox: Inbox) -> None:
        assert isinstance(inbox, ClaimingInbox)
        inbox.submit_put_claimed(event("p-1"), b"x", "c1").cancel()
        assert await inbox.put(event("p-1"), b"x") is False
        assert await inbox.pending_count() == 1

    async def test_a_claimed_put_refuses_an_empty_consumer(self, inbox: Inbox) -> None:
        assert isinstance(inbox, ClaimingInbox)
        with pytest.raises(ConfigurationError):
            await inbox.submit_put_claimed(event("p-1"), b"x", "")
        assert await inbox.pending_count() == 0


class OpenInbox(Protocol):
    def __call__(self) -> Inbox: ...


class SharedInboxContract:
    """What inboxes of several processes on one store do together."""

    async def test_puts_from_many_inboxes_store_each_event_once(
        self, open_inbox: OpenInbox
    ) -> None:
        inboxes = [open_inbox() for _ in range(4)]
        puts = [ib.put(event(f"p-{n % 10}"), b"x") for n in range(40) for ib in inboxes]
        results = await asyncio.gather(*puts)
        assert results.count(True) == 10
        assert await inboxes[0].pending_count() == 10

    async def test_a_crashed_consumers_entries_go_to_another_process(
        self, open_inbox: OpenInbox
    ) -> None:
        crashed = open_inbox()
        for n in range(3):
            await crashed.put(event(f"p-{n}"), f"body {n}".encode())
        taken = await crashed.claim_batch("host-a", 10)
        assert len(taken) == 3
        await crashed.close()  # the process goes away without acking

        survivor = open_inbox()
        assert await survivor.claim_batch("host-b", 10) == []  # not before the claim times out
        again = await claim_eventually(survivor, "host-b")
        assert sorted(e.id for e in again) == sorted(e.id for e in taken)
        assert {e.raw for e in again} == {b"body 0", b"body 1", b"body 2"}
        assert all(e.attempts == 2 for e in again)
        await survivor.ack_many([e.id for e in again])
        assert await survivor.pending_count() == 0

    async def test_dead_letters_replay_across_processes(self, open_inbox: OpenInbox) -> None:
        first, second = open_inbox(), open_inbox()
        await first.put(event(), b"x")
        (entry,) = await first.claim_batch("a", 10)
        await first.dead_letter(entry.id, "handler raised")
        (dead,) = await second.dead_letters()
        assert (dead.id, dead.last_error) == (entry.id, "handler raised")
        await second.replay(dead.id)
        with pytest.raises(UnknownEntryError, match="dead_letters"):
            await second.replay(dead.id)
        (again,) = await first.claim_batch("a", 10)
        assert (again.id, again.last_error) == (entry.id, "handler raised")
