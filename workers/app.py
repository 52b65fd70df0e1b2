"""Seatwire's Celery app at module level, for Celery's own tools: `celery -A workers.app
inspect active_queues`, `celery -A workers.app control ...`, `celery -A workers.app flower`.

Built by the same bootstrap as `seatwire worker` (workers/celery_app.py `create_app`, from the
environment's settings, every stage registered), and nothing connects at import: the broker
is reached when a command first uses it, each process's container is built on first use. A
malformed setting fails the import, naming the variable. `seatwire worker` remains the way to
run a worker: it checks the whole configuration, the send adapter and Redis first.
"""

from __future__ import annotations

from celery import Celery

from workers.celery_app import create_app
from workers.settings import Settings

__all__ = ["app"]

app: Celery = create_app(Settings())
