"""The vfolders view: the fold (``view``), its tables and read shapes (``tables``) and its
queries (``queries``)."""
