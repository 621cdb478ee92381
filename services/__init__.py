"""The services; each meets the others only on NATS, never by import."""
