"""The sync core: the Receiver, the Consumer, the Channels and the snapshot, between a source and the writers."""
