"""Which channel takes a table's entries: the job's rules, resolved table by table as tables appear.

A channel named for exactly one table wins over a rule; among rules, the
first in the config that matches. A rule makes a channel per target its
template names: one table each, or (a merging rule) every shard the
template sends there, under the rule's pattern. Pure: the Consumer opens
the channels this names (:class:`canalbridge.sync.consumer.consumer.Consumer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from canalbridge.sync.errors import RouteConflictError
from canalbridge.sync.model.record import ChannelRecord
from canalbridge.sync.model.tables import TableId, TargetTemplate, merges
from canalbridge.sync.settings import ChannelSettings, JobSettings


class Routes:
    """Resolves ``schema.table`` to the settings of the channel that takes it (None: no channel does)."""

    def __init__(self, job: str, channels: Sequence[ChannelSettings]) -> None:
        self.job = job
        self._exact = {c.source.lower(): c for c in channels if c.pattern is None}
        self._rules = [c for c in channels if c.pattern is not None]
        # By name case-folded: catalogs may compare names so, and two channels must never share a target.
        self._targets: dict[str, ChannelSettings] = {c.target.lower(): c for c in self._exact.values()}

    def resolve(self, schema: str, table: str) -> ChannelSettings | None:
        """The channel for ``schema.table``; the same settings for every table that shares a target.

        Raises :class:`RouteConflictError` when a rule's target is another channel's.
        """
        exact = self._exact.get(f"{schema}.{table}".lower())
        if exact is not None:
            return exact
        for rule in self._rules:
            assert rule.pattern is not None
            if not rule.pattern.matches(schema, table):
                continue
            target = TargetTemplate(rule.target).format(schema, table)
            merged = merges(rule.pattern, TargetTemplate(rule.target))
            name = rule.source if merged else f"{schema}.{table}"
            if merged and TargetTemplate(rule.target).fields:
                name = f"{rule.source} into {target}"  # the rule sends its shards to several targets
            channel = _made(rule, name, target)
            known = self._targets.setdefault(target.lower(), channel)
            if known != channel:
                raise RouteConflictError(self.job, f"{schema}.{table}", target, known.rule or known.source)
            return channel
        return None

    def made(self, source: str, target: str) -> ChannelSettings | None:
        """The settings :meth:`resolve` gives the channel a rule made, named ``source`` and writing ``target``
        (as the state store remembers it); None when no rule makes it now."""
        name = self.rule_of(source)
        rule = next((rule for rule in self._rules if rule.source == name), None)
        return None if rule is None else _made(rule, source, target)

    def rule_of(self, source: str) -> str | None:
        """The pattern of the rule a channel named ``source`` came from (as :meth:`resolve` names them), or
        None for a channel of one named table, or one no rule would make now."""
        if source.lower() in self._exact:
            return None
        for rule in self._rules:
            assert rule.pattern is not None
            if source == rule.source or source.startswith(f"{rule.source} into "):
                return rule.source
        table = TableId.parse(source)
        return next((rule.source for rule in self._rules if table.table and rule.pattern is not None
                     and rule.pattern.matches(*table)), None)


def _made(rule: ChannelSettings, source: str, target: str) -> ChannelSettings:
    assert rule.pattern is not None
    merged = merges(rule.pattern, TargetTemplate(rule.target))
    return replace(rule, source=source, target=target, pattern=None, rule=rule.source, merged=merged)


def known_channels(settings: JobSettings, stored: Sequence[ChannelRecord] = ()) -> tuple[ChannelRecord, ...]:
    """A job's channels as status lists them: those named for one table, then those its rules made (as the
    state store remembers them, each with its rule), positions as ``stored`` has them."""
    routes = Routes(settings.name, settings.channels)
    by_source = {c.source: c for c in stored}
    named = tuple(by_source.get(c.source, ChannelRecord(c.source, c.target)) for c in settings.channels
                  if c.pattern is None)
    made = tuple(replace(c, rule=rule) for c in stored if c.source not in {n.source for n in named}
                 and (rule := routes.rule_of(c.source)) is not None)
    return named + made
