"""What a shaped target makes of the rows' columns and of a DDL's changes, worked out without Spark: excluded
columns are none of the target's, masked ones stay text, computed ones are none of the rows'."""

from __future__ import annotations

import pytest

from canalbridge.sync.schema.ddl import AddColumn, ChangeColumn, ColumnDef, DropColumn, Place, RenameColumn
from canalbridge.sync.settings import ChannelSettings
from spark_sink.errors import TargetTableError
from spark_sink.shaping import Shaping

CHANNEL = ChannelSettings("db.orders", "lake.db.orders", exclude=("Note",), mask=("email",),
                          computed={"order_day": "to_date(created)"})


def shaping() -> Shaping:
    return Shaping(CHANNEL, "a salt of sixteen characters")


def test_the_rows_map_onto_the_target_without_its_computed_columns_and_with_the_excluded_ones():
    assert shaping().row_columns(["id", "email", "created", "ORDER_DAY"]) == ("id", "email", "created", "Note")
    assert shaping().row_columns(["id", "note"]) == ("id", "note"), "(one the target has is not named twice)"


def test_a_ddl_leaves_excluded_columns_out_and_masked_ones_text():
    changes = (AddColumn(ColumnDef("note", "varchar(10)")), AddColumn(ColumnDef("email", "int")),
               AddColumn(ColumnDef("qty", "int"), Place(after="NOTE")),
               ChangeColumn("email", ColumnDef("mail", "varchar(200)")), ChangeColumn("note", ColumnDef("n", "text")),
               RenameColumn("note", "remark"), DropColumn("note"), DropColumn("email"), RenameColumn("id", "key"))
    assert shaping().alteration(changes) == (
        AddColumn(ColumnDef("email", "text")), AddColumn(ColumnDef("qty", "int")),
        ChangeColumn("email", ColumnDef("mail", "text")), DropColumn("email"), RenameColumn("id", "key"))


def test_entries_that_no_longer_fit_the_rows_are_named():
    rows = ["id", "email", "note", "created"]
    shaping().check(rows, ["id"], target=[])
    # A masked column a DDL dropped and the target kept: nothing to mask. One renamed (the target has it no more).
    shaping().check(["id", "note", "created"], ["id"], target=["id", "email", "created"])
    with pytest.raises(TargetTableError, match="mask names email, which neither the rows"):
        shaping().check(["id", "mail", "note", "created"], ["id"], target=["id", "mail", "created"])
    with pytest.raises(TargetTableError, match="exclude names Note, a key column"):
        shaping().check(rows, ["id", "Note"], target=[])
    with pytest.raises(TargetTableError, match=r"computed\.order_day has the name of one of the rows. columns"):
        shaping().check([*rows, "order_day"], ["id"], target=[])


def test_the_salt_is_not_in_its_repr():
    assert "sixteen" not in repr(shaping())
