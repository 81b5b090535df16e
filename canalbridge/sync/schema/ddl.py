"""MySQL DDL statements, as Canal forwards them, read into the schema changes they make.

The one module that reads DDL text. sqlglot parses it (MySQL dialect); what
comes out is a closed set of frozen values, one per change to a table's
columns or to the table itself, so that nothing downstream needs the parser.

A statement is *understood* when sqlglot gives a statement this module knows
(ALTER, CREATE, DROP, TRUNCATE, RENAME TABLE). An understood ALTER that
changes no column (an index, a comment, a default, the engine) has no
changes. A statement it does not understand keeps its reason: the caller
cross-checks it against the column list of the table's next row image, as
a statement that leaves the columns as they were can be skipped.

Types are MySQL's text (``bigint(20) unsigned``, ``decimal(12, 2)``,
``varchar(30)``), as :meth:`canalbridge.mysql_types.MySqlType.parse` reads
Canal's ``mysqlType``. They say what a DDL declares; the type Canal sends
with the next row, read live from MySQL, stays the authority for values.

Its length: one reader of sqlglot's tree; the statements it understands and the changes they make
change together.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from canalbridge.sync.errors import first_line
from canalbridge.sync.model.tables import TableId


@dataclass(frozen=True)
class TableName:
    """A table a statement names; ``schema`` is None where the statement left it to the session's."""

    schema: str | None
    table: str

    def matches(self, schema: str, table: str) -> bool:
        """Whether this is ``schema.table``, with the session's schema ``schema`` for an unqualified name.

        MySQL compares table names as the server's file system does; Canal
        sends them as the statement wrote them, so compare case-blind.
        """
        return (self.schema is None or self.schema.lower() == schema.lower()) and self.table.lower() == table.lower()

    def resolved(self, session: str) -> TableId:
        """The table this names, read in a session whose schema is ``session``."""
        return TableId(self.schema or session, self.table)


@dataclass(frozen=True)
class Place:
    """Where a column goes: ``FIRST``, ``AFTER name``, or (neither) where it is, at the end for a new one."""

    first: bool = False
    after: str | None = None


@dataclass(frozen=True)
class ColumnDef:
    """A column as a statement declares it."""

    name: str
    mysql_type: str
    not_null: bool = False


@dataclass(frozen=True)
class AddColumn:
    """``ADD [COLUMN] name type [FIRST | AFTER x]``."""

    column: ColumnDef
    place: Place = Place()


@dataclass(frozen=True)
class DropColumn:
    """``DROP [COLUMN] name``."""

    name: str


@dataclass(frozen=True)
class ChangeColumn:
    """``CHANGE old new type`` or ``MODIFY name type``: a rename when the names differ, a type, a place."""

    name: str
    column: ColumnDef
    place: Place = Place()

    @property
    def new_name(self) -> str:
        """The column's name after the change (as :attr:`RenameColumn.new_name`)."""
        return self.column.name

    @property
    def renames(self) -> bool:
        return self.name.lower() != self.new_name.lower()


@dataclass(frozen=True)
class RenameColumn:
    """``RENAME COLUMN old TO new`` (the type stays)."""

    name: str
    new_name: str


@dataclass(frozen=True)
class ChangeKey:
    """The primary key after ``DROP PRIMARY KEY``, ``ADD PRIMARY KEY (...)`` or a column declared ``PRIMARY KEY``:
    ``columns`` in key order, empty when the table is left without one."""

    columns: tuple[str, ...]


@dataclass(frozen=True)
class CreateTable:
    """``CREATE TABLE``; ``columns`` is empty for ``CREATE TABLE ... LIKE`` or ``AS SELECT``."""

    columns: tuple[ColumnDef, ...]
    key: tuple[str, ...] = ()


@dataclass(frozen=True)
class TruncateTable:
    """``TRUNCATE [TABLE] t``."""


@dataclass(frozen=True)
class DropTable:
    """``DROP TABLE t`` (one per table the statement drops)."""


@dataclass(frozen=True)
class RenameTable:
    """``RENAME TABLE t TO u`` or ``ALTER TABLE t RENAME TO u``."""

    to: TableName


SchemaChange = (AddColumn | DropColumn | ChangeColumn | RenameColumn | ChangeKey
                | CreateTable | TruncateTable | DropTable | RenameTable)


@dataclass(frozen=True)
class Ddl:
    """One statement: the changes it makes to each table it names, or why it was not understood."""

    sql: str
    changes: tuple[tuple[TableName, SchemaChange], ...] = ()
    tables: tuple[TableName, ...] = ()  # every table the statement names, changed or not
    not_understood: str | None = None  # why, when sqlglot gave no statement this module reads

    @property
    def understood(self) -> bool:
        return self.not_understood is None

    def changes_for(self, schema: str, table: str) -> tuple[SchemaChange, ...]:
        """The changes to ``schema.table``, in statement order (``schema``: the session's, as Canal sends it)."""
        return tuple(change for name, change in self.changes if name.matches(schema, table))

    def names(self, schema: str, table: str) -> bool:
        """Whether the statement names ``schema.table`` at all."""
        return any(name.matches(schema, table) for name in self.tables)


class _DropFallbackNotes(logging.Filter):
    """sqlglot logs a warning for each statement it falls back to a bare Command for; here that is a result."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_DropFallbackNotes())

# MySQL's own names where sqlglot's type names differ from what MySQL stores (and Canal then sends).
_ALIASES = {"boolean": "tinyint(1)", "serial": "bigint(20) unsigned"}


def parse_ddl(sql: str) -> Ddl:
    """Read one DDL statement (never raises: what it cannot read says why in :attr:`Ddl.not_understood`)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read="mysql") if s is not None]
    except (ParseError, TokenError) as exc:
        return Ddl(sql, not_understood=f"sqlglot cannot parse it: {first_line(exc)}")
    if len(statements) != 1:
        return Ddl(sql, not_understood=f"{len(statements)} statements")
    statement = statements[0]
    try:
        if isinstance(statement, exp.Alter) and statement.args.get("kind", "").upper() == "TABLE":
            return _alter(sql, statement)
        if isinstance(statement, exp.Create) and statement.args.get("kind", "").upper() == "TABLE":
            return _create(sql, statement)
        if isinstance(statement, exp.Drop) and statement.args.get("kind", "").upper() == "TABLE":
            tables = tuple(_table(t) for t in statement.args.get("expressions") or statement.args.get("tables") or ())
            return Ddl(sql, tuple((t, DropTable()) for t in tables), tables)
        if isinstance(statement, exp.TruncateTable):
            tables = tuple(_table(t) for t in statement.expressions)
            return Ddl(sql, tuple((t, TruncateTable()) for t in tables), tables)
        if isinstance(statement, exp.Command) and statement.this.upper() == "RENAME":
            return _rename_tables(sql, statement)
    except _NotUnderstood as exc:
        return Ddl(sql, not_understood=str(exc))
    if isinstance(statement, exp.Command):
        return Ddl(sql, not_understood=f"sqlglot does not know this form of {statement.this.upper()}")
    return Ddl(sql, not_understood=f"not a table DDL ({type(statement).__name__})")


class _NotUnderstood(Exception):
    pass


def _alter(sql: str, statement: exp.Alter) -> Ddl:
    table = _table(statement.this)
    changes: list[tuple[TableName, SchemaChange]] = []
    for action in statement.args.get("actions") or ():
        if isinstance(action, exp.ColumnDef):
            changes.append((table, AddColumn(_column(action), _place(action))))
            if _declares_key(action):
                changes.append((table, ChangeKey((_name(action.this),))))
        elif isinstance(action, exp.DropPrimaryKey):
            changes.append((table, ChangeKey(())))
        elif isinstance(action, exp.AddConstraint) and (key := _primary_key(action)) is not None:
            changes.append((table, ChangeKey(key)))
        elif isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "COLUMN":
            changes.extend((table, DropColumn(_name(column))) for column in action.args.get("tables") or ())
        elif isinstance(action, exp.ModifyColumn):
            definition = action.this
            if not isinstance(definition, exp.ColumnDef):
                raise _NotUnderstood(f"a column change sqlglot read as {type(definition).__name__}")
            was = action.args.get("rename_from")
            column = _column(definition)
            changes.append((table, ChangeColumn(_name(was) if was is not None else column.name, column,
                                                _place(definition))))
            if _declares_key(definition):
                changes.append((table, ChangeKey((column.name,))))
        elif isinstance(action, exp.RenameColumn):
            changes.append((table, RenameColumn(_name(action.this), _name(action.args["to"]))))
        elif isinstance(action, exp.AlterRename):
            to = _table(action.this)
            changes.append((table, RenameTable(TableName(to.schema or table.schema, to.table))))
        # Anything else (indexes, constraints, defaults, options) leaves the columns as they are.
    tables = tuple(dict.fromkeys([table, *(c.to for _, c in changes if isinstance(c, RenameTable))]))
    return Ddl(sql, tuple(changes), tables)


def _declares_key(definition: exp.ColumnDef) -> bool:
    """``col type PRIMARY KEY``: the column alone becomes the key."""
    return any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint)
               for c in definition.args.get("constraints") or ())


def _primary_key(action: exp.AddConstraint) -> tuple[str, ...] | None:
    """The columns of ``ADD [CONSTRAINT name] PRIMARY KEY (...)``; None for another constraint (an index)."""
    for node in action.expressions:
        named = node.expressions if isinstance(node, exp.Constraint) else [node]  # CONSTRAINT name PRIMARY KEY
        for key in named:
            if isinstance(key, exp.PrimaryKey):
                return tuple(_name(column) for column in key.expressions)
    return None


def _create(sql: str, statement: exp.Create) -> Ddl:
    schema = statement.this
    if isinstance(schema, exp.Schema):
        table = _table(schema.this)
        columns: list[ColumnDef] = []
        key: list[str] = []
        for item in schema.expressions:
            if isinstance(item, exp.ColumnDef):
                columns.append(_column(item))
                if any(isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint)
                       for c in item.args.get("constraints") or ()):
                    key.append(columns[-1].name)
            elif isinstance(item, exp.PrimaryKey):
                key.extend(_name(part) for part in item.expressions)
        return Ddl(sql, ((table, CreateTable(tuple(columns), tuple(key))),), (table,))
    table = _table(schema)  # CREATE TABLE t LIKE u, CREATE TABLE t AS SELECT ...: columns come with the rows
    return Ddl(sql, ((table, CreateTable(())),), (table,))


def _rename_tables(sql: str, statement: exp.Command) -> Ddl:
    """``RENAME TABLE a TO b[, c TO d]``, which sqlglot leaves as text: read with its tokenizer."""
    text = statement.expression.name if isinstance(statement.expression, exp.Literal) else ""
    tokens = [t.text for t in sqlglot.tokenize(text, read="mysql")]
    if not tokens or tokens[0].upper() != "TABLE":
        raise _NotUnderstood("RENAME without TABLE")
    pairs: list[tuple[TableName, SchemaChange]] = []
    names: list[TableName] = []
    rest = tokens[1:]
    while rest:
        old, rest = _dotted(rest)
        if not rest or rest[0].upper() != "TO":
            raise _NotUnderstood("RENAME TABLE without TO")
        new, rest = _dotted(rest[1:])
        pairs.append((old, RenameTable(TableName(new.schema or old.schema, new.table))))
        names.extend((old, new))
        if rest:
            if rest[0] != ",":
                raise _NotUnderstood(f"unexpected {rest[0]!r} in RENAME TABLE")
            rest = rest[1:]
    return Ddl(sql, tuple(pairs), tuple(dict.fromkeys(names)))


def _dotted(tokens: list[str]) -> tuple[TableName, list[str]]:
    if len(tokens) >= 3 and tokens[1] == ".":
        return TableName(tokens[0], tokens[2]), tokens[3:]
    if not tokens:
        raise _NotUnderstood("a table name is missing")
    return TableName(None, tokens[0]), tokens[1:]


def _table(node: exp.Expression) -> TableName:
    if not isinstance(node, exp.Table):
        raise _NotUnderstood(f"expected a table, sqlglot read {type(node).__name__}")
    return TableName(node.db or None, node.name)


def _name(node: exp.Expression) -> str:
    return node.name


def _column(definition: exp.ColumnDef) -> ColumnDef:
    kind = definition.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise _NotUnderstood(f"column {definition.name} has no type")
    not_null = any(isinstance(c.args.get("kind"), exp.NotNullColumnConstraint)
                   for c in definition.args.get("constraints") or ())
    return ColumnDef(definition.name, _type_text(kind), not_null)


def _type_text(kind: exp.DataType) -> str:
    """MySQL's type text: the name and modifiers lower-case, the arguments (enum labels) as written."""
    text = kind.sql(dialect="mysql")
    head, paren, rest = text.partition("(")
    if paren:
        args, _, tail = rest.rpartition(")")
        text = f"{head.lower()}({args}){tail.lower()}"
    else:
        text = text.lower()
    return _ALIASES.get(text, text)


def _place(definition: exp.ColumnDef) -> Place:
    position = definition.args.get("position")
    if not isinstance(position, exp.ColumnPosition):
        return Place()
    where = str(position.args.get("position") or "").upper()
    if where == "FIRST":
        return Place(first=True)
    if where == "AFTER" and position.this is not None:
        return Place(after=_name(position.this))
    raise _NotUnderstood(f"column position {position.sql(dialect='mysql')!r}")


def columns_after(names: tuple[str, ...], changes: tuple[SchemaChange, ...], *, drop: bool = True) -> tuple[str, ...]:
    """``names`` (a table's columns in order) as ``changes`` leave them: the one place that says how.

    With ``drop`` False a dropped column stays (a target that keeps it).
    Names compare case-blind, as MySQL's do; a change that names a column
    the list lacks leaves the list as it is (the target check says more).
    """
    columns = list(names)

    def index(name: str) -> int | None:
        return next((i for i, column in enumerate(columns) if column.lower() == name.lower()), None)

    def insert(name: str, where: Place) -> None:
        after = index(where.after) if where.after is not None else None
        if where.first:
            columns.insert(0, name)
        elif after is not None:
            columns.insert(after + 1, name)
        else:
            columns.append(name)

    for change in changes:
        if isinstance(change, AddColumn):
            if index(change.column.name) is None:
                insert(change.column.name, change.place)
        elif isinstance(change, DropColumn):
            if drop and (at := index(change.name)) is not None:
                del columns[at]
        elif isinstance(change, RenameColumn):
            if (at := index(change.name)) is not None:
                columns[at] = change.new_name
        elif isinstance(change, ChangeColumn):
            if (at := index(change.name)) is None:
                continue
            columns[at] = change.column.name
            if change.place != Place():
                del columns[at]
                insert(change.column.name, change.place)
    return tuple(columns)


def column_aliases(aliases: dict[str, str], names: tuple[str, ...],
                   changes: tuple[SchemaChange, ...]) -> dict[str, str]:
    """A shared target's aliases (a source name, lower case, -> the target column it went to) after
    ``changes`` renamed some of ``names``; a rename of a renamed column carries its older names along."""
    out = dict(aliases)
    present = {name.lower() for name in names}
    for change in changes:
        if isinstance(change, RenameColumn | ChangeColumn) and change.name.lower() != change.new_name.lower() \
                and change.name.lower() in present:
            old, new = change.name.lower(), change.new_name
            out = {source: new if target.lower() == old else target for source, target in out.items()}
            out[old] = new
            present = (present - {old}) | {new.lower()}
    return out


def renamed(names: tuple[str, ...], changes: tuple[SchemaChange, ...]) -> tuple[str, ...]:
    """``names`` under the renames in ``changes`` (``RENAME COLUMN``, ``CHANGE``), in the same order."""
    current = list(names)
    for change in changes:
        if isinstance(change, RenameColumn | ChangeColumn):
            current = [change.new_name if name.lower() == change.name.lower() else name for name in current]
    return tuple(current)


def changes_columns(changes: tuple[SchemaChange, ...]) -> bool:
    """Whether any of ``changes`` touches the columns or the key (the others are about the table as a whole)."""
    return any(isinstance(c, AddColumn | DropColumn | ChangeColumn | RenameColumn | ChangeKey) for c in changes)


def key_after(key: tuple[str, ...], changes: tuple[SchemaChange, ...]) -> tuple[str, ...]:
    """A table's primary key (column names, in key order) as ``changes`` leave it: the last :class:`ChangeKey`'s
    (MySQL reads its columns by the names the statement leaves), else ``key`` renamed with its columns."""
    replaced = [change.columns for change in changes if isinstance(change, ChangeKey)]
    return replaced[-1] if replaced else renamed(key, changes)
