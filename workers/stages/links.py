"""Answer links for this deployment (pipeline/answer_links.py decides the token): the key from
the settings, and the URL a message carries, `{SEATWIRE_PUBLIC_URL}/v1/asks/{id}/answer?token=`.
The send stage puts one on the `webhook` and `file` adapters' asks (`OutboundAsk.answer_url`);
the answer route (workers/ingress/asks.py) and the ingress's rate limit read them back."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from contracts.asks import Ask
from pipeline.answer_links import LinkClaim, LinkRefused, derived_key, link_expiry, read, sign
from workers.errors import ConfigError
from workers.settings import Settings

# The adapters whose messages carry an answer link. Slack's carry buttons instead (a link in
# a channel would let anyone who reads it answer as a target). The file outbox stands in for a
# chat on one machine (`seatwire up`, the demo): its line is the message, read by whoever runs
# it, and its link leads them to answer as the person would (the links page, My asks).
LINKED_ADAPTERS = frozenset({"webhook", "file"})


@dataclass(frozen=True)
class AnswerLinks:
    key: bytes
    base_url: str

    @classmethod
    def of(cls, settings: Settings) -> AnswerLinks | None:
        """The deployment's links: keyed by SEATWIRE_ANSWER_LINK_SECRET, else by a key derived
        from the operator token; None (no links) with neither."""
        secret = settings.answer_link_secret
        try:
            operator: str | None = settings.token()
        except ConfigError:
            operator = None
        key = derived_key(None if secret is None else secret.get_secret_value(), operator)
        return None if key is None else cls(key=key, base_url=settings.ingress_url)

    def token_for(self, ask: Ask) -> str:
        """The link token of `ask`, for the people it was put to. The same ask gives the
        same token (its expiry is counted from the record's creation), so a send tried
        again posts the same link."""
        targets = [t.member_id for t in ask.targets]
        return sign(self.key, ask.id, targets, link_expiry(ask))

    def url_for(self, ask: Ask) -> str:
        path = f"/v1/asks/{quote(ask.id, safe='')}/answer"
        return f"{self.base_url}{path}?token={quote(self.token_for(ask), safe='')}"

    def read(self, token: str, *, now_ms: int) -> LinkClaim | LinkRefused:
        return read(self.key, token, now_ms=now_ms)
