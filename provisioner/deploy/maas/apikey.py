"""The MAAS API key ("consumer_key:token_key:token_secret") and where it comes from."""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.deploy.maas.errors import MAASAPIKeyError
from provisioner.secrets import Secret


@dataclass(frozen=True)
class MAASApiKey:
    """The three parts of a MAAS API key; only the token secret is secret."""

    consumer_key: str
    token_key: str
    token_secret: Secret

    def __repr__(self) -> str:
        return f"MAASApiKey(consumer_key={self.consumer_key!r}, token_key={self.token_key!r})"


def parse_api_key(value: Secret | str, *, source: str = "the MAAS API key") -> MAASApiKey:
    """Split a key as printed by ``maas apikey --username=...``; errors never show the key."""
    text = value.reveal() if isinstance(value, Secret) else value
    parts = text.strip().split(":")
    if len(parts) != 3 or not all(parts):
        raise MAASAPIKeyError(
            f"{source} is not of the form consumer_key:token_key:token_secret "
            f"({len(parts)} part(s) found)",
            hint="print a key with `sudo maas apikey --username=<admin>` on the region controller",
        )
    return MAASApiKey(consumer_key=parts[0], token_key=parts[1], token_secret=Secret(parts[2]))
