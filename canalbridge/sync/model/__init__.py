"""The values every part of the sync core speaks: positions, changes, table patterns, counters and a job's record.

Nothing here starts a thread or talks to a source; the sub-packages beside
it import these values, never each other's through them.
"""
