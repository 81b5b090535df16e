"""The values every part of the sync core speaks: positions, changes, table names and patterns, counters and a
job's record.

Nothing here starts a thread or talks to a source (the import contract keeps
the parts that run out of it).
"""
