"""Revoking a consent, from any surface: an operator (`POST /v1/consents/{id}/revoke` with the
operator token, `seatwire consents revoke`), or the people the consent's ask was put to, where
they gave it (the "Revoke consent" button on its Slack message, the answer link's page).

A revocation is recorded once, in one write, with the seat's `consent_revoked` inbox item
(workers/stores/asks.py `revoke_consent`); a consent already revoked is refused and nothing is
written, so a retried click or a second person tells the seat nothing more. Then the messages
of its ask are shown again (workers/stages/answers.py): the answer stands, the consent is
said revoked, and no message offers to revoke it any more.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from celery import Celery

from workers.container import Container
from workers.stages.answers import Answers
from workers.stores.asks import Revoked

log = logging.getLogger("seatwire.asks")


@dataclass
class Consents:
    c: Container
    app: Celery | None = None

    def revoke(
        self,
        consent_id: str,
        *,
        by: str,
        now_ms: int,
        anyone: bool,
        show: bool = True,
        also: str | None = None,
    ) -> Revoked | None:
        """Revoke consent `consent_id` as `by` (None: no such consent). `anyone`: an operator
        acting for whoever they name; otherwise only its revokers (pipeline/asks.py
        `revokers`). With `show`, its messages are changed here; a caller that must answer
        fast (Slack's 3 s) passes False and calls `show` after it answered."""
        got = self.c.asks.revoke_consent(consent_id, by=by, now_ms=now_ms, anyone=anyone)
        if got is None:
            return None
        r = got.revocation
        if r.outcome == "revoked":
            log.info(
                "%s (seat %s told at inbox position %s)", r.why, r.consent.seat_id, got.position
            )
            if show:
                self.show(got, also=also)
        else:
            log.info("revoking consent %s by %s changes nothing: %s", consent_id, by, r.why)
        return got

    def show(self, got: Revoked, *, also: str | None = None) -> None:
        """The consent's ask on its message, and the messages of its escalations, and `also`
        (the message clicked, when another), as they now stand."""
        ask = got.revocation.ask
        if ask is None:
            ask = self.c.asks.get(got.revocation.consent.ask_id)
        if ask is not None:
            Answers(self.c, self.app).show_everywhere(ask, also=also)
