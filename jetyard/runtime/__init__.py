"""Jetyard's runtime: ``jetyard up`` (the whole system on one machine: ``up``, ``supervisor``,
``health``, and what it keeps in the data directory: ``data_dir``, ``bootstrap``,
``*_setup``), ``jetyard serve`` (one service in this process: ``serve``, ``heap``) and the NATS
server child (``natsserver``), which the tests and benchmarks start too."""
