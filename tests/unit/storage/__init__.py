"""Storage: path rules, tokens, volume layout and the folder tree on real directories."""
