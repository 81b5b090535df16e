"""Canal server defaults the bridge plans around (``canal.properties``), stated once.

The sync core sizes its commits by them, the configuration warns against
them, and the dev server starts with them, as a stock Canal does.
"""

STORE_BUFFER_SIZE = 16384  # canal.instance.memory.buffer.size: un-acked entries (or memunits) the store holds
STORE_MEMUNIT = 1024  # canal.instance.memory.buffer.memunit: bytes per unit in MEMSIZE mode
