"""The audit feature: who did what, from the event log (``eventLog``) and the access log
(``accessLog``)."""
