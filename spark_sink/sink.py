"""A channel's Iceberg sink: its writer, and the state reader, schema applier and maintainer over its table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from canalbridge.sync.channel.sink import ChannelSink
from canalbridge.sync.settings import ChannelSettings
from spark_sink.changelog import IcebergChangelogWriter
from spark_sink.errors import TargetTableError
from spark_sink.maintainer import IcebergMaintainer
from spark_sink.schema_applier import IcebergSchemaApplier
from spark_sink.settings import SparkSettings
from spark_sink.target_state import IcebergTargetReader
from spark_sink.upsert import IcebergUpsertWriter
from spark_sink.writer import IcebergWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _writer(spark: SparkSession, channel: ChannelSettings, job: str, settings: SparkSettings) -> IcebergWriter:
    """The transaction writer for a channel's ``mode``."""
    if channel.mode == "changelog":
        return IcebergChangelogWriter(spark, channel, job, settings)
    if channel.mode == "upsert":
        return IcebergUpsertWriter(spark, channel, job, settings)
    raise TargetTableError(f"channel {channel.source}: unknown mode {channel.mode!r} (upsert or changelog)")


def make_sink(spark: SparkSession, channel: ChannelSettings, job: str, settings: SparkSettings) -> ChannelSink:
    """The sink of a channel: its mode's writer, and the other three parts acting through it."""
    writer = _writer(spark, channel, job, settings)
    return ChannelSink(IcebergTargetReader(writer), writer, IcebergSchemaApplier(writer), IcebergMaintainer(writer))
