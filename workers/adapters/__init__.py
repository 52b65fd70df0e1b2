"""Outbound adapters that talk to real providers (the file outbox is workers/outbox.py)."""
