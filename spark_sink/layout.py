"""A target's layout as its channel sets it: the partition spec (``partition_by``), the sort order (``sort_by``)
and the table properties (``table_properties``), given to a target made before they were set."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from structlog.typing import FilteringBoundLogger

from canalbridge.sync.model.partitions import PartitionField
from canalbridge.sync.model.sort_order import SortField
from canalbridge.sync.settings import ChannelSettings
from spark_sink.errors import TargetTableError
from spark_sink.table import TargetTable


class TargetLayout:
    """What a channel's layout settings make of its target: the spec it is made with, and what a target made
    before, or by hand, is given as the channel prepares it."""

    def __init__(self, channel: ChannelSettings, log: FilteringBoundLogger) -> None:
        self.channel = channel
        self.log = log
        self.partition_by = [PartitionField.parse(text) for text in channel.partition_by or ()]
        self.sort_by = [SortField.parse(text) for text in channel.sort_by or ()]

    def properties(self) -> dict[str, str]:
        """The channel's ``table_properties`` as Iceberg spells them (booleans in lower case)."""
        return {key: str(value).lower() if isinstance(value, bool) else str(value)
                for key, value in self.channel.table_properties.items()}

    def made_with(self, replaced: Mapping[str, str] | None) -> dict[str, str]:
        """The properties a target is made with: the channel's, and, when it replaces a target (a rebuild;
        ``replaced``: that target's properties), at least that target's format, which Iceberg does not lower."""
        wanted = self.properties()
        if replaced:
            self._check_format(wanted, replaced)
            if "format-version" in replaced:
                wanted.setdefault("format-version", replaced["format-version"])
        return wanted

    def spec(self, columns: list[str]) -> list[PartitionField]:
        """``partition_by`` with each column as the target spells it (Iceberg finds a partition's column by its
        exact name); :class:`TargetTableError` for a field of no column of the target."""
        return [dataclasses.replace(field, column=self._column(columns, "partition_by", str(field), field.column))
                for field in self.partition_by]

    def apply(self, table: TargetTable, columns: list[str],
              record: Callable[[Mapping[str, str]], dict[str, str]] | None) -> None:
        """Give ``table`` what the settings name and it lacks: partition fields (those it has that the
        setting does not name stay; rows written before keep their spec), the sort order, and the table
        properties, with those ``record`` (the shaping's) makes of the properties the target has."""
        wanted = self.properties()
        if "format-version" in wanted:
            self._check_format(wanted, table.properties())  # (before any change)
        if self.partition_by:
            added = table.add_partition_fields(self.spec(columns))
            if added:
                self.log.info("spark.partition_fields_added", fields=[str(field) for field in added])
        if self.sort_by:
            self._sort(table, columns)
        if wanted or record is not None:
            have = table.properties()  # (after the sort order, which sets write.distribution-mode)
            differ = {key: value for key, value in wanted.items() if have.get(key) != value}
            if record is not None:
                differ.update(record(have))
            if differ:
                table.set_properties(differ)
                self.log.info("spark.table_properties_set", properties=differ)

    def _check_format(self, wanted: Mapping[str, str], have: Mapping[str, str]) -> None:
        """Iceberg upgrades a table's format, never downgrades it, nor replaces it with a table of a lower one:
        a lower ``format-version`` than the target's stops the target, naming both, before any change."""
        wanted_version, have_version = wanted.get("format-version"), have.get("format-version")
        if wanted_version and have_version and have_version.isdigit() and int(wanted_version) < int(have_version):
            raise TargetTableError(f"target {self.channel.target}: table_properties' format-version is "
                                   f"{wanted_version}, and the target is format {have_version}: Iceberg does not "
                                   f"downgrade a table, nor rebuild it at a lower format; set {have_version}")

    def _sort(self, table: TargetTable, columns: list[str]) -> None:
        """Set the target's sort order to ``sort_by`` where it differs (a field Iceberg would spell otherwise
        compares by what it means)."""
        wanted = [dataclasses.replace(field, term=dataclasses.replace(
            field.term, column=self._column(columns, "sort_by", str(field), field.term.column)))
            for field in self.sort_by]
        if [_folded(field) for field in table.sort_fields()] != [_folded(field) for field in wanted]:
            table.set_sort_order(wanted)
            self.log.info("spark.sort_order_set", order=[str(field) for field in wanted])

    def _column(self, columns: list[str], setting: str, entry: str, column: str) -> str:
        spelled = {name.lower(): name for name in columns}
        name = spelled.get(column.lower())
        if name is None:
            raise TargetTableError(f"target {self.channel.target}: {setting}'s {entry} names {column}, which is not "
                                   f"one of its columns (renamed or dropped by a DDL? name the column as the target "
                                   f"has it)")
        return name


def _folded(field: SortField) -> SortField:
    return dataclasses.replace(field, term=dataclasses.replace(field.term, column=field.term.column.lower()))
