"""Canal over TCP: the link that owns the conversation, the ledger of batches, where a restarted Canal may start,
and how much each get asks for."""
