"""The Celery app of a process: `workers/broker.py`'s settings with the stage tasks
registered on it, each handed the container it works with.

`create_app` builds an app for given settings without connecting anywhere; the workers, the
ingress and the embedded mode each build their own. `register=False` gives an app that only
publishes (the ingress, the CLI, the benchmarks).
"""

from __future__ import annotations

from celery import Celery

from workers.bootstrap import Container, Provider
from workers.broker import new_app
from workers.settings import Settings
from workers.stages import register_tasks


def create_app(
    settings: Settings, *, register: bool = True, container: Container | None = None
) -> Celery:
    """An app for `settings`; with `register`, every stage of the stage table registered on
    it, working with `container` when given, else with one built in each process on first
    use (`Provider`)."""
    app = new_app(settings)
    if register:
        provider = (
            Provider.of(container)
            if container is not None
            else Provider.from_settings(settings, app=app)
        )
        register_tasks(app, provider)
    return app
