"""The Celery message the one-script intake writes, by its old path: the wire format now lives
in workers/broker.py (below the stages, which write it too). Re-exported for code that still
imports it from here."""

from __future__ import annotations

from workers.broker import EMBED, celery_body, celery_message

__all__ = ["EMBED", "celery_body", "celery_message"]
