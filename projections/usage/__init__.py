"""The usage view: the fold (``view``), its tables and read shapes (``tables``), the pure
accounting over them (``accounting``) and its query (``queries``)."""
