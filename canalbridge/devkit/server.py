"""The dev server: a Canal-protocol server on loopback for tests, benchmarks and the demo.

It stands in for Canal's network and store behaviour, not for its binlog
parser: entries are fed to it through :meth:`DevServer.feed`.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable

import structlog

from canalbridge.devkit.destination import Destination, DestinationConfig
from canalbridge.devkit.session import Session
from canalbridge.devkit.store import StoreCursors
from canalbridge.protocol import EntryProtocol_pb2 as entry_pb

log = structlog.get_logger("canalbridge.devkit")


class DevServer:
    """A Canal-compatible server with several destinations, listening on 127.0.0.1.

    ``port=0`` picks a free port; :attr:`port` tells which after :meth:`start`.
    The destinations (stores, outstanding batches, ack cursors) outlive
    connections and :meth:`stop`, so a restarted server resumes where it was.
    """

    def __init__(
        self, destinations: Iterable[DestinationConfig], host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.host = host
        self.port = port
        self.destinations = {config.name: Destination(config) for config in destinations}
        if not self.destinations:
            raise ValueError("a dev server needs at least one destination")
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._sessions: dict[Session, threading.Thread] = {}
        self._sessions_lock = threading.Condition()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> DevServer:
        """Listen and accept clients in a background thread."""
        if self._listener is not None:
            return self
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._acceptor = threading.Thread(
            target=self._accept_loop, args=(listener,), name="devserver-accept", daemon=True
        )
        self._acceptor.start()
        for destination in self.destinations.values():
            destination.allow_parser()
            if any(meta.subscribed for meta in destination.clients()):
                destination.start_parser()
        log.info("devserver.listening", address=self.address, destinations=sorted(self.destinations))
        return self

    def stop(self, *, crash: bool = False) -> None:
        """Stop listening, drop every connection and stop the parsers; state is kept.

        Like a restarted Canal, the next start re-parses each destination from
        its meta cursor: the cursor's entry and the acked part of an open
        transaction are delivered again. ``crash`` stops as a SIGKILL does,
        without the meta flush of a clean shutdown: everything acked since the
        last flush comes again too.
        """
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        if self._acceptor is not None:
            self._acceptor.join()
            self._acceptor = None
        for destination in self.destinations.values():
            destination.store.close()  # wakes parsers and sessions waiting on the store
        for destination in self.destinations.values():
            destination.stop_parser()
        with self._sessions_lock:
            sessions = dict(self._sessions)
        self.drop_connections()
        for thread in sessions.values():
            thread.join()
        for destination in self.destinations.values():
            # What a restarted Canal does: outstanding batches are forgotten,
            # batch ids start again at 1 and the parser starts over at the meta cursor.
            for meta in destination.clients():
                meta.restart()
            again = destination.reparse_from_cursor(crashed=crash)
            destination.store.reopen()
            log.info("devserver.destination_stopped", destination=destination.name, crash=crash,
                     acked_events_again=again)
        log.info("devserver.stopped", address=self.address)

    def restart(self, *, crash: bool = False) -> None:
        """Stop (see :meth:`stop`), then listen again on the same port with the same destinations."""
        self.stop(crash=crash)
        self.start()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def drop_connections(self) -> int:
        """Cut every client connection (a network failure); return how many were cut.

        A session blocked in a waiting get finishes that get first, as a
        Canal worker thread would, and then finds its socket gone.
        """
        with self._sessions_lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.close()
        return len(sessions)

    # -- feeding and observation ---------------------------------------------------

    def feed(self, destination: str, entries: Iterable[entry_pb.Entry]) -> None:
        """Append entries to a destination's source log (consumed lazily)."""
        self.destinations[destination].feed(entries)

    def preload(self, destination: str, timeout_s: float) -> None:
        """Parse every entry fed so far into the destination's store now, before any client subscribes.

        Served from memory, the source then costs next to nothing per row
        (benchmarks of the bridge alone). ``ValueError`` if the store fills
        first, ``RuntimeError`` if the parser stops, ``TimeoutError`` after
        ``timeout_s``.
        """
        target = self.destinations[destination]
        target.start_parser()
        deadline = time.monotonic() + timeout_s
        while not target.wait_parsed(0.5):
            if target.store.put_waiting:
                raise ValueError(f"destination {destination}: its store (capacity {target.store.capacity}) is full "
                                 "before every entry is in it: give it a larger capacity")
            if not target.parser_alive:
                raise RuntimeError(f"destination {destination}: its parser stopped before every entry was in its "
                                   "store (reading the source failed: see the log)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"destination {destination}: the entries are not all in its store after "
                                   f"{timeout_s:g} s")

    def cursors(self, destination: str) -> StoreCursors:
        return self.destinations[destination].store.cursors()

    def is_drained(self, destination: str) -> bool:
        """True when every fed entry has reached the store and been handed out."""
        target = self.destinations[destination]
        cursors = target.store.cursors()
        return target.wait_parsed(0) and cursors.get == cursors.put

    def wait_sessions(self, count: int, timeout_s: float) -> bool:
        """Wait until exactly ``count`` client connections are open."""
        with self._sessions_lock:
            return self._sessions_lock.wait_for(lambda: len(self._sessions) == count, timeout_s)

    # -- plumbing ---------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # the listener was shut down
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = Session(sock, self.destinations, self._forget)
            thread = threading.Thread(target=session.serve, name=f"devserver-session-{session.peer}", daemon=True)
            with self._sessions_lock:
                self._sessions[session] = thread
                self._sessions_lock.notify_all()
            thread.start()

    def _forget(self, session: Session) -> None:
        with self._sessions_lock:
            self._sessions.pop(session, None)
            self._sessions_lock.notify_all()
