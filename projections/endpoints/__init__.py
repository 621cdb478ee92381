"""The endpoints view (model serving): the fold (``view``), its tables and read shapes
(``tables``) and its queries (``queries``)."""
