"""Model serving's write model: the commands on endpoints (``messages``) and the ``Endpoint``
aggregate that decides them (``aggregate``), both run by the serving controller."""
