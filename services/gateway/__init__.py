"""The gateway: the GraphQL API and the web console, in front of the event log. It reads the
views and the log's folds, authenticates and authorises each caller, and sends commands; the
services behind it decide. Feature packages (``sessions``, ``cluster``, ``folders``, ``usage``,
``admin_api``, ``audit``, ``console``) over a small core (this package's modules, ``core`` and
``auth``); ``docs/architecture.md`` says where a new feature goes."""
