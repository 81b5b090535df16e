"""The link to a job's source, opened by that source's own package."""

from __future__ import annotations

from canalbridge.sync.source.canal import link as canal
from canalbridge.sync.source.canal.settings import CanalSettings
from canalbridge.sync.source.kafka import link as kafka
from canalbridge.sync.source.kafka.settings import KafkaSettings
from canalbridge.sync.source.link import LinkSetup, SourceLink


def open_link(setup: LinkSetup) -> SourceLink:
    """A new link to the source ``setup.job`` reads; it connects when the Receiver opens it."""
    source = setup.job.source
    if isinstance(source, CanalSettings):
        return canal.open_link(setup, source)
    if isinstance(source, KafkaSettings):
        return kafka.open_link(setup, source)
    raise TypeError(f"job {setup.job.name}: no link reads {type(source).__name__}")
