"""The one owner of the conversation with Canal: get, ack, rollback, reconnects, and the hand-off.

Only the Receiver's thread touches the wire. It calls :meth:`CanalLink.open`
to (re)connect and :meth:`CanalLink.exchange` in a loop; each exchange sends
the acks the Consumer asked for, then a rollback if one is due, then one
GET, and files its reply in the :class:`BatchLedger`. Because Canal handles
a connection's packets in order and answers acks only when they fail, the
reply to that GET is what proves the acks landed: an ack is never taken as
done on the strength of having been sent.

The Consumer calls :meth:`take`, :meth:`ack_through` and :meth:`rollback`;
none of them blocks on the network. Each batch it takes carries the epoch
it belongs to; a rollback or reconnect starts a new epoch and voids every
batch handed out before it.

A job on a Canal HA cluster (``zk_servers``) asks ZooKeeper at each
(re)connect which server runs the destination
(:class:`~canalbridge.canal.cluster.CanalCluster`), and before each
exchange whether another one runs it now: then it reconnects there, and the
new server goes on from the cursor the cluster keeps.
"""

from __future__ import annotations

import structlog

from canalbridge.canal import CanalBatch, CanalConnector, CanalError
from canalbridge.canal.cluster import CanalCluster, CanalClusterError, ServerAddress
from canalbridge.sync.errors import CanalContinuityError, SourceChangedError
from canalbridge.sync.model.position import EntryPosition, Position, PositionRange
from canalbridge.sync.model.record import PartitionRecord
from canalbridge.sync.model.tracking import AckState
from canalbridge.sync.source.canal.boundaries import SeenBoundaries
from canalbridge.sync.source.canal.get_size import GetSize
from canalbridge.sync.source.canal.ledger import MAX_DOUBTS, BatchLedger, LedgerBatch, Verdict
from canalbridge.sync.source.canal.settings import CanalSettings
from canalbridge.sync.source.handoff import HandOff
from canalbridge.sync.source.link import LinkSetup, Outstanding, TakenBatch

log = structlog.get_logger("canalbridge.canal_link")


class CanalLink:
    """Connector, ledger and the bounded queue between Receiver and Consumer, under one lock (a SourceLink)."""

    resends_in_stream = True  # Canal's parser, reconnected to MySQL, sends a transaction again
    marks_transactions = True

    def __init__(self, job: str, connector: CanalConnector, canal: CanalSettings, subscribe_filter: str,
                 capacity: int, acks: AckState, *, get_size: GetSize, cluster: CanalCluster | None = None) -> None:
        self.job = job
        self.connector = connector
        self.cluster = cluster
        self.canal = canal
        self.get_size = get_size  # (the Receiver's thread's alone)
        self.store_get_size = get_size.limit  # the cap on every get: what bounds the store the policy plans for
        self.subscribe_filter = subscribe_filter
        self.acks = acks
        self._ledger = BatchLedger()
        self._seen = SeenBoundaries()  # where a restarted Canal may start again
        self._handoff: HandOff[tuple[TakenBatch, LedgerBatch]] = HandOff(capacity)
        self._cond = self._handoff.lock  # (it guards the ledger too)
        self._log = log.bind(job=job, canal=canal.address, destination=canal.destination)
        self.description = f"canal {canal.address} destination {canal.destination!r}"

    connection_errors: tuple[type[Exception], ...] = (CanalError,)

    # -- the Receiver's side ------------------------------------------------------------

    def open(self) -> None:
        """Connect and subscribe; everything handed out before is void and Canal is rolled back first."""
        self.connector.disconnect()
        if self.cluster is not None:
            server = self.cluster.running_server()
            self.connector.host, self.connector.port = server.host, server.port
            self._log.info("canal.running_server", server=str(server))
        self.connector.connect()
        self.connector.subscribe(self.subscribe_filter)
        with self._cond:
            epoch = self._reset_locked(reconnected=True)
        self._log.info("canal.connected", epoch=epoch, filter=self.subscribe_filter)

    @property
    def connected(self) -> bool:
        return self.connector.connected

    def disconnect(self) -> None:
        self.connector.disconnect()

    def wait_for_room(self, timeout_s: float) -> bool:
        """Wait until the queue can take one more batch (or :meth:`close` was called)."""
        return self._handoff.wait_for_room(timeout_s)

    def exchange(self) -> CanalBatch | None:
        """Send due acks and rollback, then one GET; returns the batch if it was accepted.

        Raises :class:`~canalbridge.canal.CanalError` when the connection
        fails (the caller reconnects) and :class:`CanalContinuityError` when
        Canal keeps serving batches that cannot be proven contiguous.
        """
        if self.cluster is not None:
            moved = self.cluster.moved(ServerAddress(self.connector.host, self.connector.port))
            if moved is not None:  # (what was taken from the old server is replayed by the new one)
                raise CanalClusterError(f"the destination moved to {moved}", address=self.canal.address,
                                        destination=self.canal.destination)
        with self._cond:
            acks = self._ledger.acks_to_send()
            rollback = self._ledger.rollback_due
            epoch = self._ledger.epoch
            self._ledger.acks_sent(acks)  # perhaps sent: a reply, or a replay past them, proves them
        for ack in acks:
            self.connector.ack(ack.batch_id)
        if rollback:
            self.connector.rollback()
            with self._cond:
                if self._ledger.epoch == epoch:
                    self._ledger.rolled_back()
                epoch = self._ledger.epoch
        batch = self.connector.get_without_ack(self.get_size.next(), self.canal.poll_timeout_ms)
        if not batch.is_empty:
            self.get_size.observe(len(batch.entries), batch.raw_size)
        with self._cond:
            self._acks_landed_locked()
            if batch.is_empty:
                if self._ledger.epoch == epoch:
                    self._ledger.idle()
                return None
            range_ = PositionRange(EntryPosition.of(batch.entries[0]), EntryPosition.of(batch.entries[-1]))
            acked = self.acks.position
            if isinstance(acked, EntryPosition) and range_.start.from_another_binlog_than(acked):
                raise SourceChangedError(self.canal.address, self.canal.destination, range_.start, acked)
            # Batch ids start at 1 again only when Canal (or its instance) restarted.
            restarted = batch.batch_id == 1 and self._ledger.last_seen_id is not None
            verdict, record = self._ledger.receive(epoch, batch.batch_id, range_, len(batch.entries),
                                                   batch.raw_size)
            if record is not None:  # accepted
                if restarted and isinstance(acked, EntryPosition) and range_.start <= acked \
                        and not batch.entries[0].header.gtid and self._seen.explains(batch.entries[0]) is False:
                    # A restarted Canal dumps again from its meta cursor: a boundary taken before. (By GTID it
                    # starts at the next transaction instead, perhaps one it had dropped as empty: not judged.)
                    raise SourceChangedError(self.canal.address, self.canal.destination, range_.start, acked,
                                             "a restarted Canal starts at an entry taken before; this is none")
                self._seen.note(batch.entries)
                self._handoff.put_locked((TakenBatch(batch, record.epoch, record.batch_id), record))
                return batch
            if verdict is Verdict.DOUBTED:
                self._handoff.clear_locked()
                doubts = list(self._ledger.doubts)
        if verdict is Verdict.DOUBTED:
            self._log.warning("canal.batch_doubted", batch=batch.batch_id, reason=doubts[-1].reason,
                              in_a_row=len(doubts))
            if len(doubts) >= MAX_DOUBTS:
                raise CanalContinuityError(self.canal.address, self.canal.destination,
                                           [doubt.reason for doubt in doubts])
        return None

    def _acks_landed_locked(self) -> None:
        landed = self._ledger.acks_landed()
        if landed is not None:
            self.acks.record(landed)

    # -- the Consumer's side -----------------------------------------------------------------

    @property
    def epoch(self) -> int:
        with self._cond:
            return self._ledger.epoch

    def is_current(self, epoch: int) -> bool:
        with self._cond:
            return epoch == self._ledger.epoch and not self._ledger.rollback_due

    def take(self, timeout_s: float) -> TakenBatch | None:
        """The oldest accepted batch, or None after ``timeout_s`` or once :meth:`close` was called."""
        item = self._handoff.take(timeout_s, lambda item: self._ledger.consumed(item[1]))
        return None if item is None else item[0]

    def supersede(self, epoch: int, batch_id: int, counts_through: Position | None) -> None:
        """Only the batch's entries through ``counts_through`` hold back its ack (see BatchLedger.supersede)."""
        assert counts_through is None or isinstance(counts_through, EntryPosition), "Canal's are binlog positions"
        with self._cond:
            self._ledger.supersede(epoch, batch_id, counts_through)

    def ack_through(self, epoch: int, cut: Position | None) -> int:
        """Ask to ack every taken batch of ``epoch`` whose entries that count lie at or before ``cut``; how many.

        The acks go out with the Receiver's next request; :attr:`acks` moves
        when Canal has taken them.
        """
        assert cut is None or isinstance(cut, EntryPosition), "Canal's are binlog positions"
        with self._cond:
            return len(self._ledger.ack_through(epoch, cut))

    def rollback(self) -> int:
        """Void every batch handed out and roll Canal back to its ack cursor; returns the new epoch."""
        with self._cond:
            return self._reset_locked(reconnected=False)

    @property
    def outstanding(self) -> Outstanding:
        """Entries and bytes taken by the Consumer and not yet asked to be acked."""
        with self._cond:
            return self._ledger.outstanding

    # -- both --------------------------------------------------------------------------------

    def close(self) -> None:
        """Wake every waiter for good and drop the connection (wakes a GET waiting on Canal)."""
        self._handoff.close()
        self.connector.disconnect()
        if self.cluster is not None:
            self.cluster.close()

    def snapshot_refusal(self) -> str | None:
        return None  # one stream, in the binlog's order

    def partitions(self) -> tuple[PartitionRecord, ...]:
        return ()

    def _reset_locked(self, *, reconnected: bool) -> int:
        epoch = self._ledger.reset(reconnected=reconnected)
        self._handoff.clear_locked()
        return epoch


def open_link(setup: LinkSetup, canal: CanalSettings) -> CanalLink:
    """The link of a job that reads ``canal``: a connector with its credentials, and Canal's subscription filter
    built from the job's channels."""
    job = setup.job
    connector = CanalConnector(canal.host, canal.port, canal.destination, username=canal.username,
                               password=canal.password, client_id=canal.client_id)
    cluster = (CanalCluster(canal.zk_servers, canal.destination, canal.client_id) if canal.zk_servers
               else None)
    return CanalLink(job.name, connector, canal, job.canal_filter, job.commit.queue_batches, setup.acks,
                     get_size=GetSize.of(canal, job.commit), cluster=cluster)
