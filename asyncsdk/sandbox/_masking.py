"""What the sandbox may show of a webhook URL, and of any text that can carry one (an error, a
receiver's answer): the one masking rule of the page, the stats JSON and the failure lines.

``mask_url`` hides the password, every query value and the path's token of one URL;
``mask_text`` masks every URL found in a text the same way and also hides the secrets of the
delivery's own URL (its token, query values and password) wherever they appear in the text, as
written or percent-encoded.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote, unquote, unquote_plus

from yarl import URL

__all__ = ["HIDDEN", "mask_text", "mask_url"]

HIDDEN: Final = "***"

#: A secret shorter than this is hidden inside URLs only: in free text it cannot be told apart
#: from ordinary words.
SECRET_MIN: Final = 6

#: A URL written in a text: a scheme, ``://`` and what follows up to a space or a quote.
_URL_IN_TEXT: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
#: Punctuation that ends a sentence rather than the URL before it.
_TRAILING: Final = ".,;:!?)]}"


def _hide(secret: str) -> str:
    """The first characters of ``secret`` (a quarter, at most four) and ``***``; a secret hidden
    already stays as it is, so that masking a masked text changes nothing."""
    if secret.endswith(HIDDEN):
        return secret
    return secret[: min(4, len(secret) // 4)] + HIDDEN


def _token_index(segments: list[str]) -> int | None:
    """Where the receiver's token is among a path's ``/``-split segments, if it has one: the
    last segment of a path of two or more, or a single segment of 16 characters or more."""
    named = [i for i, s in enumerate(segments) if s]
    if len(named) >= 2 or (named and len(segments[named[0]]) >= 16):
        return named[-1]
    return None


def mask_url(url: str) -> str:
    """``url`` as it may be shown: the password, every query value and the path's token hidden.

    The token of a receiver is the last segment of a path of two or more (``/hooks/TOKEN``) or
    a single segment of 16 characters or more (``/TOKEN``); its first characters stay, so that
    two URLs can still be told apart.  A text that does not parse as a URL is hidden whole.
    """
    try:
        parsed = URL(url)
        if parsed.password:
            parsed = parsed.with_password(HIDDEN)
        segments = parsed.raw_path.split("/")
        token = _token_index(segments)
        if token is not None:  # before the query: a new path drops it
            segments[token] = _hide(segments[token])
            parsed = parsed.with_path("/".join(segments), encoded=True).with_query(parsed.query)
        if parsed.query:
            parsed = parsed.with_query({name: HIDDEN for name in parsed.query})
        return str(parsed)
    except ValueError:
        return HIDDEN


def _secrets(url: str) -> set[str]:
    """The secrets of ``url`` as they may be written in a text: its token, query values and
    password, each as written in the URL and decoded, and each of these percent-encoded (as
    when the whole URL is quoted into another one)."""
    try:
        parsed = URL(url)
    except ValueError:
        return set()
    found: set[str] = set()
    segments = parsed.raw_path.split("/")
    token = _token_index(segments)
    if token is not None:
        found.add(segments[token])
    if parsed.raw_password:
        found.add(parsed.raw_password)
    for pair in parsed.raw_query_string.split("&"):
        found.add(pair.partition("=")[2])
    forms: set[str] = set()
    for raw in found:
        for form in (raw, unquote(raw), unquote_plus(raw)):
            forms |= {form, quote(form, safe="")}
    return {form for form in forms if len(form) >= SECRET_MIN}


def mask_text(text: str, url: str) -> str:
    """``text`` as it may be shown of a delivery to ``url``: every URL in it masked as
    ``mask_url`` masks one, and the secrets of ``url`` (token, query values, password), written
    as is or percent-encoded, hidden wherever else they appear."""

    def masked(match: re.Match[str]) -> str:
        found = match.group()
        kept = found.rstrip(_TRAILING)
        return mask_url(kept) + found[len(kept) :]

    text = _URL_IN_TEXT.sub(masked, text)
    secrets = sorted(_secrets(url), key=len, reverse=True)
    if not secrets:
        return text
    pattern = re.compile("|".join(re.escape(secret) for secret in secrets))
    return pattern.sub(lambda match: _hide(match.group()), text)
