"""Helpers the tests share: machine capabilities and required tools, waiting on events, small
fixtures' building blocks. Test modules import from here, never from each other."""
