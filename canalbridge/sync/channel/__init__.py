"""A channel: one source table (or a rule's tables) into one target, staged on one thread and committed on
another through the sink interface it declares."""
