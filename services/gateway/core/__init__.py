"""What the gateway's features share: the log's folds the requests read (the tenancy directory,
quota use), the views and their readers, the access log, session owners, command outcomes,
input errors, live tails and the GraphQL types several features return."""
