"""Which channel takes a table's entries: the job's rules resolved table by table, and the open channels that
follow renamed tables."""
