"""Where a job's entries come from: what every link to a source offers, the hand-off to the Consumer, and the
Receiver thread that drives the conversation.

Each source is a package of its own: :mod:`canalbridge.sync.source.canal`
(Canal over TCP) and :mod:`canalbridge.sync.source.kafka` (Canal's Kafka
topic). Neither imports the other.
"""
