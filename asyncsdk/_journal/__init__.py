"""Durable journals of keyed runs: the protocol (``contract``) and its SQLite, PostgreSQL and
Redis implementations."""

from asyncsdk._journal.contract import Claim, Journal, RunEntry, RunStage, lapsed, new_owner
from asyncsdk._journal.postgres import PostgresJournal
from asyncsdk._journal.redis import RedisJournal
from asyncsdk._journal.sqlite import SQLiteJournal

__all__ = [
    "Claim",
    "Journal",
    "PostgresJournal",
    "RedisJournal",
    "RunEntry",
    "RunStage",
    "SQLiteJournal",
    "lapsed",
    "new_owner",
]
