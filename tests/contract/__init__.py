"""One contract, every event store: the same scenarios on JetStream and in memory."""
