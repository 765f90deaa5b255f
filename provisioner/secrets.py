"""A string type for secrets that never prints itself, and the reference saying where one lives."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator


class Secret:
    """Wraps a secret value: repr/str/format show ``***``; call :meth:`reveal` to use it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """Return the secret; only at the point of use (an HTTP auth header, a form field)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("Secret values are not picklable")


class SecretRef(BaseModel):
    """Where a secret lives: an environment variable, a file outside the repo, or Ansible Vault."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: str | None = None
    file: str | None = None
    vault: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> SecretRef:
        sources = [s for s in ("env", "file", "vault") if getattr(self, s)]
        if len(sources) != 1:
            raise ValueError("give exactly one of env, file or vault")
        if self.vault and not self.key:
            raise ValueError("a vault reference needs `key`: the name of the entry in the vault")
        return self
