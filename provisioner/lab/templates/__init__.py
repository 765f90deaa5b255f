"""Jinja templates the lab puts in front of sushy-emulator's own (package data)."""
