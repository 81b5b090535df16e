"""Canal server defaults the bridge plans around (``canal.properties``), stated once.

The sync core sizes its commits by them, the configuration warns against
them, and the dev server starts with them, as a stock Canal does.
"""

STORE_BUFFER_SIZE = 16384  # canal.instance.memory.buffer.size: un-acked entries (or memunits) the store holds
STORE_MEMUNIT = 1024  # canal.instance.memory.buffer.memunit: bytes per unit in MEMSIZE mode
# canal.instance.transaction.size: the parser hands the store up to this many entries
# at once, and the store takes them only when that many slots are free.
TRANSACTION_SIZE = 1024
STORE_BATCH_MODE = "MEMSIZE"  # canal.instance.memory.batch.mode in the shipped canal.properties
BATCH_MODES = ("MEMSIZE", "ITEMSIZE")  # MEMSIZE: a get's size and the store bound count memunits; ITEMSIZE: entries
