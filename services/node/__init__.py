"""Node agent: capacity, images, containers, devices, heartbeats, logs."""
