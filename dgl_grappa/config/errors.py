"""The one error type of the config tree and the helper every rule raises it through."""

from __future__ import annotations


class ConfigError(ValueError):
    """A user error in the configuration (bad key, bad value, missing file)."""


def require(ok: bool, msg: str) -> None:
    """Raise :class:`ConfigError` with ``msg`` (one line naming the key, the value and the fix) unless ``ok``.

    Example:
        >>> require(3 >= 1, "train.epochs=3 must be >= 1")
    """
    if not ok:
        raise ConfigError(msg)
