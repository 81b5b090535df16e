"""How far a job got, shared between its threads: the last ack its source confirmed, and each channel's last
committed position."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from canalbridge.sync.model.clock import utc_text
from canalbridge.sync.model.position import Ack, Position, later


class AckState:
    """The last ack the source confirmed. Written by the job's link only; read by status.

    The value is swapped whole, so a reader never sees a position with
    another ack's time.
    """

    def __init__(self, last: Ack | None = None) -> None:
        self.last = last
        self._changed = threading.Condition()

    def record(self, position: Position) -> None:
        """The source confirmed acks through a batch ending at ``position``.

        The position never moves back: a batch of entries Canal sent a second
        time (see the Consumer) can end before one acked earlier.
        """
        with self._changed:
            last = self.last
            known = last.position if last is not None else None
            now = later(known, position)
            if now != known:
                self.last = Ack(now, int(time.time() * 1000))
            self._changed.notify_all()

    def forget(self) -> None:
        """``canalbridge reset``: no ack is known (the next one may lie anywhere, even on another source)."""
        with self._changed:
            self.last = None

    def wait_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``done()`` holds, looking again at each ack the source confirms."""
        with self._changed:
            return self._changed.wait_for(done, timeout_s)

    def wait_through(self, position: Position, timeout_s: float) -> bool:
        """Wait until Canal confirmed an ack at or after ``position``."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self.last is not None and self.last.position >= position, timeout_s
            )

    @property
    def position(self) -> Position | None:
        last = self.last
        return last.position if last else None

    def position_info(self) -> str:
        last = self.last
        return format_position_info(last.position if last else None, last.time_ms if last else None)


def format_position_info(position: Position | None, ack_time_ms: int | None) -> str:
    """Doris's status string: position, execute time (ISO 8601, UTC, where Doris shows the host's local time),
    delay between execution and ack, gtid."""
    if position is None:
        return "position:N/A"
    text = f"position:[{position}], executeTime:[{utc_text(position.execute_time_ms)}]"
    if ack_time_ms is not None:
        text += f", delay:{max(ack_time_ms - position.execute_time_ms, 0)}ms"
    if position.gtid:
        text += f", gtid({position.gtid})"
    return text


class CommittedPositions:
    """Each channel's last committed position: the point up to which it skips replayed entries.

    Owned by the job; the Consumer advances it after commits and when a
    target reports what it holds. Within a run a position only moves
    forward; a run starts from what each target holds.
    """

    def __init__(self) -> None:
        self._positions: dict[str, Position] = {}

    def get(self, source: str) -> Position | None:
        return self._positions.get(source)

    def advance(self, source: str, position: Position | None) -> None:
        if position is not None:
            self._positions[source] = later(self._positions.get(source), position)

    def forget(self, source: str) -> None:
        """``canalbridge reset``: the channel's target no longer holds a position."""
        self._positions.pop(source, None)

    def read_back(self, source: str, position: Position | None) -> None:
        """What the channel's target holds as its run starts: it wins, even if earlier (a table emptied or
        rolled back since must be written again); no commit of an earlier run is in flight then."""
        self.forget(source)
        self.advance(source, position)

    def as_dict(self) -> dict[str, Position]:
        return dict(self._positions)
