"""The exit statuses every ``canalbridge`` command keeps (the table on the command-line page), and the exception a
command raises to end with one once it printed why."""

from __future__ import annotations

OK = 0  # done; `verify`: every target equals its source; `run`: a clean stop
FAILED = 1  # the command ran and failed, or the daemon refused it, or it was not confirmed
USAGE = 2  # the command line or the config is wrong (`validate`: also a source or jar the config names)
STUCK = 3  # `run` only: stopped, but a job's thread was still busy after stop_timeout_seconds
UNREACHABLE = 4  # no daemon answers on the config's control endpoint
UNTOLD = 5  # what the command followed ended before it could tell: the job stopped, a check could not finish
DIFFERS = 6  # `verify`: a target differs from its source
INTERRUPTED = 130  # Ctrl-C while following; what was started goes on

SAID = {OK: "done", FAILED: "failed or refused", USAGE: "bad command line or config",
        STUCK: "run stopped with a thread busy", UNREACHABLE: "no daemon answers", UNTOLD: "could not tell",
        DIFFERS: "verify found a difference", INTERRUPTED: "interrupted"}  # (in --help)


class CommandExit(Exception):
    """End the command with ``status``; what went wrong was printed already."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status
