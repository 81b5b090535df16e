"""A channel's Iceberg sink: its writer, and the state reader, schema applier and maintainer over its table."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.settings import ChannelSettings
from spark_sink.changelog import ChangelogMode
from spark_sink.errors import TargetTableError
from spark_sink.maintainer import IcebergMaintainer
from spark_sink.schema_applier import IcebergSchemaApplier
from spark_sink.settings import SparkSettings
from spark_sink.target_state import IcebergTargetReader
from spark_sink.upsert import UpsertMode
from spark_sink.write_mode import WriteMode
from spark_sink.writer import IcebergWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


MODES: dict[str, Callable[[IcebergWriter], WriteMode]] = {"upsert": UpsertMode, "changelog": ChangelogMode}


def make_writer(spark: SparkSession, channel: ChannelSettings, job: str, settings: SparkSettings) -> IcebergWriter:
    """The transaction writer of a channel, in its ``mode``."""
    mode = MODES.get(channel.mode)
    if mode is None:
        raise TargetTableError(f"channel {channel.source}: unknown mode {channel.mode!r} (upsert or changelog)")
    return IcebergWriter(spark, channel, job, settings, mode)


def make_sink(spark: SparkSession, channel: ChannelSettings, job: str, settings: SparkSettings) -> ChannelSink:
    """The sink of a channel: its mode's writer, and the other three parts acting through it."""
    writer = make_writer(spark, channel, job, settings)
    return ChannelSink(IcebergTargetReader(writer), writer, IcebergSchemaApplier(writer), IcebergMaintainer(writer))
