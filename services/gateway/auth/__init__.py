"""Gateway authentication: signed requests, logins, secrets and passwords at rest, rate limits."""
