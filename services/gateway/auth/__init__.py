"""Gateway authentication: signed requests, logins (and the ``login``/``logout`` mutations),
secrets and passwords at rest, rate limits."""
