"""The publisher of consistent cuts: the newest cut once the schedule allows, a failure passed over."""

from __future__ import annotations

import queue
import threading

from canalbridge.sync.job.cuts import CutPublisher
from canalbridge.sync.model.cuts import Cut, PublishedCut
from canalbridge.sync.model.position import EntryPosition
from canalbridge.sync.settings import CutSettings

WAIT_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeLog:
    """Publishes what it is handed into ``taken``; fails the labels in ``refuse``."""

    def __init__(self, latest: PublishedCut | None = None) -> None:
        self.taken: queue.Queue[Cut] = queue.Queue()
        self.refuse: set[str] = set()
        self._latest = latest
        self.seq = 0

    def latest(self) -> PublishedCut | None:
        return self._latest

    def publish(self, cut: Cut) -> PublishedCut:
        self.taken.put(cut)
        if cut.label in self.refuse:
            raise RuntimeError(f"catalog refused {cut.label}\nat a stack line")
        self.seq += 1
        return PublishedCut(self.seq, f"cut-j-{self.seq}", cut.label, str(cut.position), {"lake.a.t": 1}, 0, "log")


def cut(n: int) -> Cut:
    return Cut(f"j-run-{n}", EntryPosition("mysql-bin.000001", 100 + n), {"lake.a.t": frozenset({f"j-run-{n}"})})


def started(log: FakeLog, clock: Clock) -> tuple[CutPublisher, list[PublishedCut], threading.Event]:
    stop = threading.Event()
    published: list[PublishedCut] = []
    publisher = CutPublisher("j", log, CutSettings(interval_seconds=60.0), stop, published.append, clock)
    publisher.start()
    return publisher, published, stop


def test_the_newest_cut_offered_is_published_once_the_interval_has_passed():
    clock, log = Clock(), FakeLog()
    publisher, published, stop = started(log, clock)
    try:
        publisher.offer(cut(1))
        publisher.offer(cut(2))  # before the first is due: the first is passed over
        clock.now += 60
        assert log.taken.get(timeout=WAIT_S).label == "j-run-2"
        publisher.offer(cut(3))
        publisher.offer(cut(4))
        clock.now += 60  # (60 s after the last publish began)
        assert log.taken.get(timeout=WAIT_S).label == "j-run-4"
    finally:
        stop.set()
        assert publisher.join(WAIT_S)  # (what it took is published before it ends)
    assert [each.label for each in published] == ["j-run-2", "j-run-4"]


def test_a_cut_the_log_refuses_is_said_and_the_next_one_is_published():
    clock, log = Clock(), FakeLog()
    log.refuse.add("j-run-1")
    publisher, published, stop = started(log, clock)
    try:
        publisher.offer(cut(1))
        clock.now += 60
        assert log.taken.get(timeout=WAIT_S).label == "j-run-1"
        publisher.offer(cut(2))
        clock.now += 60
        assert log.taken.get(timeout=WAIT_S).label == "j-run-2"
    finally:
        stop.set()
        assert publisher.join(WAIT_S)
    assert [each.label for each in published] == ["j-run-2"]
    assert publisher.error is None  # (cleared by the publish after it)


def test_the_error_names_the_cut_in_one_line_until_a_cut_is_published():
    clock, log = Clock(), FakeLog()
    log.refuse.add("j-run-1")
    publisher, published, stop = started(log, clock)
    try:
        publisher.offer(cut(1))
        clock.now += 60
        assert log.taken.get(timeout=WAIT_S).label == "j-run-1"
        stop.set()
        assert publisher.join(WAIT_S)  # (the failure was taken in before the thread ended)
        assert publisher.error == "cut j-run-1 at mysql-bin.000001:101: catalog refused j-run-1"
        assert published == []
    finally:
        stop.set()


def test_the_newest_cut_the_log_holds_is_reported_when_it_starts():
    held = PublishedCut(41, "cut-j-41", "j-old-9", "mysql-bin.000001:50", {"lake.a.t": 7}, 0, "log")
    clock, log = Clock(), FakeLog(latest=held)
    publisher, published, stop = started(log, clock)
    stop.set()
    assert publisher.join(WAIT_S)
    assert published == [held]
