"""What a shaped target makes of the rows' columns and of a DDL's changes, worked out without Spark: excluded
columns are none of the target's, masked ones stay text, and both follow renames; computed ones are none of the
rows'. The target must hold nothing the shaping keeps out of it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from canalbridge.sync.model.tables import TablePattern
from canalbridge.sync.schema.ddl import AddColumn, ChangeColumn, ColumnDef, DropColumn, Place, RenameColumn
from canalbridge.sync.settings import ChannelSettings
from spark_sink.errors import TargetTableError
from spark_sink.shaping import PROP_SHAPING, Shaping, ShapingRefused

CHANNEL = ChannelSettings("db.orders", "lake.db.orders", exclude=("Note",), mask=("email",),
                          computed={"order_day": "to_date(created)"})
SALT = "a salt of sixteen characters"


def shaping(salt: str = SALT) -> Shaping:
    return Shaping(CHANNEL, salt)


def test_the_rows_map_onto_the_target_without_its_computed_columns_and_with_the_excluded_ones():
    assert shaping().row_columns(["id", "email", "created", "ORDER_DAY"]) == ("id", "email", "created", "note")
    assert shaping().row_columns(["id", "note"]) == ("id", "note"), "(one the target has is not named twice)"


def test_a_ddl_leaves_excluded_columns_out_and_masked_ones_text():
    changes = (AddColumn(ColumnDef("note", "varchar(10)")), AddColumn(ColumnDef("email", "int")),
               AddColumn(ColumnDef("qty", "int"), Place(after="NOTE")),
               ChangeColumn("email", ColumnDef("email", "varchar(200)")),
               ChangeColumn("note", ColumnDef("note", "text")),
               DropColumn("note"), DropColumn("email"), RenameColumn("id", "key"))
    assert shaping().alteration(changes) == (
        AddColumn(ColumnDef("email", "text")), AddColumn(ColumnDef("qty", "int")),
        ChangeColumn("email", ColumnDef("email", "text")), DropColumn("email"), RenameColumn("id", "key"))


def test_masked_and_excluded_columns_stay_so_under_the_names_ddls_rename_them_to():
    followed = shaping()
    changes = (ChangeColumn("email", ColumnDef("mail", "varchar(200)")), RenameColumn("note", "remark"),
               RenameColumn("qty", "NOTE"), RenameColumn("remark", "REMARK"), RenameColumn("mail", "e_mail"))
    assert followed.alteration(changes) == (ChangeColumn("email", ColumnDef("mail", "text")),
                                            RenameColumn("mail", "e_mail"))
    assert followed.masked == {"email", "mail", "e_mail"} and followed.excluded == {"note", "remark"}
    record = followed.record({})
    assert json.loads(record[PROP_SHAPING])["renamed"] == {"mail": "email", "e_mail": "email", "remark": "note"}
    assert SALT not in record[PROP_SHAPING]
    # What the target records, a channel made afresh (a restart) takes up, while its entry is there.
    restarted = shaping()
    restarted.learn(record)
    assert restarted.masked == {"email", "mail", "e_mail"} and restarted.record(record) == {}
    assert restarted.alteration((AddColumn(ColumnDef("email", "int")),)) == (AddColumn(ColumnDef("email", "text")),)
    unmasked = Shaping(ChannelSettings("db.orders", "lake.db.orders", exclude=("note",)), SALT)
    unmasked.learn(record)
    assert unmasked.masked == set() and unmasked.excluded == {"note", "remark"}
    with pytest.raises(TargetTableError, match="it holds masked values of column e_mail, which mask no longer names"):
        unmasked.check(["id", "e_mail"], ["id"], ["id", "e_mail"], record)


def test_ddls_the_shaping_cannot_follow_are_refused_naming_the_entry():
    with pytest.raises(ShapingRefused, match=r"renamed to email, which mask names: the target holds login.s values"):
        shaping().alteration((RenameColumn("login", "email"),))
    with pytest.raises(ShapingRefused, match=r"the name of computed\.order_day"):
        shaping().alteration((AddColumn(ColumnDef("order_day", "date")),))


def test_a_target_holding_what_the_shaping_keeps_out_is_named():
    rows, key = ["id", "email", "note", "created"], ["id"]
    made = shaping().record({})
    shaping().check(rows, key, None, {})
    shaping().check(rows, key, ["id", "email", "created", "order_day"], made)
    with pytest.raises(TargetTableError, match="it has column note, which exclude leaves out"):
        shaping().check(rows, key, ["id", "email", "note"], made)
    with pytest.raises(TargetTableError, match="it holds column email in clear, written before mask named it"):
        shaping().check(rows, key, ["id", "email"], {})
    with pytest.raises(TargetTableError, match="its masked values were keyed by another salt"):
        shaping(salt="another salt, as long as the first").check(rows, key, ["id", "email"], made)
    with pytest.raises(TargetTableError, match=r"exclude names note, which neither the rows .* nor the target have"):
        shaping().check(["id", "email", "created"], key, None, {})
    with pytest.raises(TargetTableError, match=r"mask names email, which neither the rows .* nor the target have"):
        shaping().check(["id", "mail", "note"], key, ["id", "mail"], made)
    with pytest.raises(TargetTableError, match="exclude names Note, a key column"):
        shaping().check(rows, ["id", "Note"], None, {})
    with pytest.raises(TargetTableError, match=r"computed\.order_day has the name of one of the rows' columns"):
        shaping().check([*rows, "order_day"], key, None, {})
    with pytest.raises(TargetTableError, match=f"table property {PROP_SHAPING} is not what canalbridge writes"):
        shaping().check(rows, key, ["id"], {PROP_SHAPING: "[1]"})
    # A pattern's tables may lack a column its entries name.
    pattern = Shaping(dataclasses.replace(CHANNEL, pattern=TablePattern("db.orders_*")), SALT)
    pattern.check(["id", "created"], key, None, {})


def test_the_salt_is_not_in_its_repr():
    assert "sixteen" not in repr(shaping())
