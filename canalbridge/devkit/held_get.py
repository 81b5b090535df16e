"""Fault injection: a GET held back until another connection's rollback, then served.

This is the window in which a real Canal can lose a client's rows: a GET
that arrived on a connection just before it died has not yet reached the
instance lock when the client's new connection rolls the cursor back, so
the dead connection's GET takes entries *after* the rollback and leaves
them outstanding on the server, handed to nobody. Timing decides whether
that happens; :class:`HeldGet` makes it happen every time.
"""

from __future__ import annotations

import threading
from enum import Enum

HOLD_LIMIT_S = 30.0  # a held GET never outlives this, so a test that forgets it cannot hang the server


class _Stage(Enum):
    ARMED = "armed"
    PARKED = "parked"
    RELEASED = "released"
    SERVED = "served"


class HeldGet:
    """One shot: park the next GET of a destination, serve it right after another session's rollback.

    The rollback that releases the GET waits until the GET has taken its
    entries, so whatever the rolling-back session asks next is served after
    the stale GET, as in the worst real interleaving.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._stage = _Stage.ARMED
        self._parked_by: object | None = None
        self.batch_id: int | None = None  # what the stale GET was given (-1: nothing to take)

    def park(self, session: object) -> bool:
        """Called by a GET before it takes the instance lock; True if this GET was held."""
        with self._cond:
            if self._stage is not _Stage.ARMED:
                return False
            self._stage = _Stage.PARKED
            self._parked_by = session
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._stage is not _Stage.PARKED, HOLD_LIMIT_S)
            return True

    def served(self, batch_id: int) -> None:
        """Called by the held GET once it has taken its entries."""
        with self._cond:
            self.batch_id = batch_id
            self._stage = _Stage.SERVED
            self._cond.notify_all()

    def after_rollback(self, session: object) -> None:
        """Called at the end of every rollback: another session's rollback serves the held GET."""
        with self._cond:
            if self._stage is not _Stage.PARKED or session is self._parked_by:
                return
            self._stage = _Stage.RELEASED
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._stage is _Stage.SERVED, HOLD_LIMIT_S)

    def wait_parked(self, timeout_s: float) -> bool:
        """Wait until a GET is held."""
        with self._cond:
            return self._cond.wait_for(lambda: self._stage is not _Stage.ARMED, timeout_s)

    def wait_served(self, timeout_s: float) -> bool:
        """Wait until the held GET has been served after a rollback."""
        with self._cond:
            return self._cond.wait_for(lambda: self._stage is _Stage.SERVED, timeout_s)
