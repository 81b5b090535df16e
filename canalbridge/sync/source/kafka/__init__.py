"""Canal's Kafka topic: the link that owns the consumer, what is known of each partition, where each starts, and
the connection."""
