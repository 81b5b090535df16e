"""A sync job: one Canal destination, its Receiver, Consumer and Channels, and its state machine.

States follow Doris: PENDING -> RUNNING <-> PAUSED, and CANCELLED (final)
from any of them. A transient failure that outlived its retries pauses the
job with the reason; ``resume()`` starts it again from Canal's ack cursor.
A job that cannot run (a channel's target cannot be opened, a mapping that
cannot fit) is cancelled. ``pause()`` stops every thread without acking
anything uncommitted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import structlog

from canalbridge.canal import CanalConnector
from canalbridge.sync.canal_link import CanalLink
from canalbridge.sync.channel import Channel
from canalbridge.sync.consumer import Consumer, ConsumerStats
from canalbridge.sync.errors import SyncError
from canalbridge.sync.position import Ack, AckState, CommittedPositions, EntryPosition
from canalbridge.sync.receiver import Receiver
from canalbridge.sync.settings import ChannelSettings, JobSettings
from canalbridge.sync.writer import ChannelWriter

log = structlog.get_logger("canalbridge.job")

STOP_TIMEOUT_S = 60.0  # how long stopping waits for each thread

class JobState(Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    CANCELLED = "CANCELLED"


class FailKind(Enum):
    USER_CANCEL = "USER_CANCEL"
    SUBMIT_FAIL = "SUBMIT_FAIL"
    RUN_FAIL = "RUN_FAIL"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class FailMessage:
    kind: FailKind
    text: str

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.text}"


class JobStateError(Exception):
    """A transition the state machine does not allow (e.g. resuming a cancelled job)."""


WriterFactory = Callable[[ChannelSettings], ChannelWriter]
# Called with the job and whether its state changed (else: a commit happened).
JobListener = Callable[["SyncJob", bool], None]


class SyncJob:
    """Runs one job's threads; thread-safe control methods."""

    def __init__(
        self, settings: JobSettings, writer_factory: WriterFactory, listener: JobListener | None = None
    ) -> None:
        self.settings = settings
        self.listener = listener
        self.name = settings.name
        self.writer_factory = writer_factory
        self.committed = CommittedPositions()
        self.acks = AckState()
        self.state = JobState.PENDING
        self.fail_message: FailMessage | None = None
        self.create_time_ms = _now_ms()
        self.last_start_time_ms: int | None = None
        self.last_stop_time_ms: int | None = None
        self.finish_time_ms: int | None = None
        self.channels: list[Channel] = []
        self._writers: dict[str, ChannelWriter] = {}
        self._lock = threading.RLock()
        self._state_changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._link: CanalLink | None = None
        self._receiver: Receiver | None = None
        self._consumer: Consumer | None = None
        self._stats = ConsumerStats()
        self._failure_handler: threading.Thread | None = None
        self._log = log.bind(job=self.name)

    # -- control ------------------------------------------------------------------------

    def start(self) -> None:
        """PENDING or PAUSED -> RUNNING: open the channels and start the threads."""
        with self._lock:
            if self.state not in (JobState.PENDING, JobState.PAUSED):
                raise JobStateError(f"job {self.name} cannot start from {self.state.value}")
            try:
                self._open_channels()
            except Exception as exc:  # a target that cannot be opened: this job cannot run
                self._teardown()
                self._set_state(JobState.CANCELLED, FailMessage(FailKind.SUBMIT_FAIL, str(exc)))
                self.finish_time_ms = _now_ms()
                raise
            self._stop = threading.Event()
            canal = self.settings.canal
            connector = CanalConnector(
                canal.host, canal.port, canal.destination,
                username=canal.username, password=canal.password, client_id=canal.client_id,
            )
            self._link = CanalLink(self.name, connector, canal, self.settings.canal_filter,
                                   self.settings.commit.queue_batches, self.acks)
            self._receiver = Receiver(self.name, self._link, self.settings.commit.reconnect_retry, self._stop,
                                      self._fail)
            self._consumer = Consumer(
                self.settings, self._link, self.channels, self.committed, self.acks, self._stop, self._fail,
                on_commit=lambda: self._notify(transition=False), stats=self._stats,
            )
            self._receiver.start()
            self._consumer.start()
            self.last_start_time_ms = _now_ms()
            self.fail_message = None
            self._set_state(JobState.RUNNING, None)

    def resume(self) -> None:
        """PAUSED -> RUNNING, from Canal's ack cursor."""
        with self._lock:
            if self.state is not JobState.PAUSED:
                raise JobStateError(f"job {self.name} is {self.state.value}, not PAUSED")
        self.start()

    def pause(self, reason: str | None = None) -> None:
        """RUNNING -> PAUSED: stop every thread; nothing uncommitted is acked."""
        with self._lock:
            if self.state is not JobState.RUNNING:
                raise JobStateError(f"job {self.name} is {self.state.value}, not RUNNING")
            self._teardown()
            self._set_state(JobState.PAUSED, FailMessage(FailKind.RUN_FAIL, reason) if reason else None)

    def cancel(self, reason: str = "cancelled by user", kind: FailKind = FailKind.USER_CANCEL) -> None:
        """Any state -> CANCELLED, for good."""
        with self._lock:
            if self.state is JobState.CANCELLED:
                return
            self._teardown()
            self.finish_time_ms = _now_ms()
            self._set_state(JobState.CANCELLED, FailMessage(kind, reason))

    def shutdown(self) -> None:
        """Stop the threads for a daemon shutdown; the state stays as it is, to resume at next start."""
        with self._lock:
            if self.state is JobState.RUNNING:
                self._teardown()
                self._notify(transition=False)

    def wait_state(self, state: JobState, timeout_s: float) -> bool:
        """Wait until the job is in ``state``."""
        with self._state_changed:
            return self._state_changed.wait_for(lambda: self.state is state, timeout_s)

    # -- inspection -----------------------------------------------------------------------

    @property
    def stats(self) -> ConsumerStats:
        return self._stats

    def position_info(self) -> str:
        return self.acks.position_info()

    # -- internals -------------------------------------------------------------------------

    def _open_channels(self) -> None:
        debug = self.settings.canal.debug
        self.channels = []
        for channel_settings in self.settings.channels:
            writer = self._writers.get(channel_settings.source)
            if writer is None:
                writer = self._writers[channel_settings.source] = self.writer_factory(channel_settings)
            channel = Channel(self.name, channel_settings, writer, debug=debug)
            channel.start()
            self.channels.append(channel)
            self.committed.advance(channel.source, channel.committed_position)

    def _teardown(self) -> None:
        """Stop and join every thread. Call with the lock held."""
        self._stop.set()
        if self._link is not None:
            self._link.close()  # wakes a GET waiting on the server and the Consumer waiting for a batch
        for worker in (self._receiver, self._consumer):
            if worker is not None and not worker.join(STOP_TIMEOUT_S):
                self._log.error("job.thread_stuck", thread=worker.name, waited_s=STOP_TIMEOUT_S)
        for channel in self.channels:
            if not channel.stop(STOP_TIMEOUT_S):
                self._log.error("job.channel_stuck", channel=channel.source, waited_s=STOP_TIMEOUT_S)
        if self._link is not None:
            self._link.close()
        self._receiver = self._consumer = self._link = None
        self.last_stop_time_ms = _now_ms()

    def _fail(self, error: SyncError) -> None:
        """Called from a worker thread that gave up: pause (or cancel) from another thread."""

        def handle() -> None:
            with self._lock:
                if self.state is not JobState.RUNNING:
                    return
                self._teardown()
                # Paused, not cancelled: retrying cannot fix a row that does not fit
                # its table, but an operator who fixes the target can resume.
                self._set_state(JobState.PAUSED, FailMessage(FailKind.RUN_FAIL, str(error)))
                self._log.error("job.paused", reason=str(error))

        # The failing thread cannot join itself, so the teardown runs elsewhere.
        self._failure_handler = threading.Thread(target=handle, name=f"job-fail-{self.name}", daemon=True)
        self._failure_handler.start()

    def _set_state(self, state: JobState, message: FailMessage | None) -> None:
        previous, self.state = self.state, state
        if message is not None or state is JobState.RUNNING:
            self.fail_message = message
        self._log.info("job.state", previous=previous.value, state=state.value, reason=str(message or ""))
        self._state_changed.notify_all()
        self._notify(transition=True)

    def _notify(self, *, transition: bool) -> None:
        if self.listener is not None:
            try:
                self.listener(self, transition)
            except Exception as exc:  # a listener must not break the job
                self._log.error("job.listener_failed", error=str(exc))

    def snapshot(self) -> dict[str, object]:
        """The job's persistent facts, for the state store and status."""
        committed = self.committed.as_dict()
        ack = self.acks.last
        return {
            "name": self.name,
            "state": self.state.value,
            "fail_kind": self.fail_message.kind.value if self.fail_message else None,
            "fail_text": self.fail_message.text if self.fail_message else None,
            "create_time_ms": self.create_time_ms,
            "last_start_time_ms": self.last_start_time_ms,
            "last_stop_time_ms": self.last_stop_time_ms,
            "finish_time_ms": self.finish_time_ms,
            "ack_position": ack.position if ack else None,
            "ack_time_ms": ack.time_ms if ack else None,
            "last_commit_time_ms": self._stats.last_commit_time_ms,
            "channels": {c.source: (c.target, committed.get(c.source)) for c in self.settings.channels},
            "updated_ms": _now_ms(),
        }

    def restore(self, state: JobState, fail_message: FailMessage | None, create_time_ms: int | None,
                ack_position: EntryPosition | None, ack_time_ms: int | None,
                last_commit_time_ms: int | None, finish_time_ms: int | None) -> None:
        """Take back what the state store remembers (before start)."""
        with self._lock:
            self.state = state
            self.fail_message = fail_message
            self.create_time_ms = create_time_ms or self.create_time_ms
            self.finish_time_ms = finish_time_ms
            self.acks.last = Ack(ack_position, ack_time_ms or 0) if ack_position is not None else None
            self._stats.last_commit_time_ms = last_commit_time_ms


def _now_ms() -> int:
    return int(time.time() * 1000)
