"""The sealer: the one writer of ``JY_SEALS``, sealing ``JY_EVENTS`` as it grows."""
