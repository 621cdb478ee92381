"""Domain events, the envelope that carries them, and the JetStream event store."""
