"""Property-based fuzzing of every parser and loader: each input parses or raises the typed error."""
