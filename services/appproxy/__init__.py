"""The app proxy: forwards HTTP and WebSocket traffic to sessions' apps (docs/appproxy.md)."""
