"""Text from logs made safe: secrets masked before anything stores or shows it (redact), and every
control character shown, never obeyed, on a terminal (visible). Leans on nothing else in the
core; everything else may lean on it."""
