"""Jetyard's composition root: the command line and the embedded runtime (``jetyard up``)."""
