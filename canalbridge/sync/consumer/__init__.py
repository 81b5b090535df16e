"""The Consumer: takes the source's batches, routes their entries to channels, decides when to commit, commits
the channels together and acks the source."""
