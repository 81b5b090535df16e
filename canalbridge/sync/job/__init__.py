"""A sync job: its state machine, one run of its threads, the snapshots and verifies a user asks of it, and the
retries of a start that failed."""
