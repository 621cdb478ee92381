"""The sessions feature: queries, mutations (create, terminate, open an app) and subscriptions
(status, list changes, output) of compute sessions, with the feeds they read."""
