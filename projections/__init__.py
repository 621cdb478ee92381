"""Read models: one module per view, rebuilt from the log (the session path milestone)."""
