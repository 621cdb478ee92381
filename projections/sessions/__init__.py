"""The sessions view: the fold (``view``) and its tables and read shape (``tables``); its
queries are ``projections.queries``'s, beside the nodes'."""
