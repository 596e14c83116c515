"""The key-value store a protocol reaches through the runtime, with c10d TCPStore
semantics, and its prefixed view (c10d PrefixStore)."""

from __future__ import annotations

import abc
from collections.abc import Sequence


class Store(abc.ABC):
    """A client of a key-value store hosted by one process (c10d TCPStore semantics).

    - ``get`` blocks until the key exists, or raises :class:`StoreTimeout` after the
      client's timeout.
    - ``compare_set(key, expected, desired)``: if the key is missing and ``expected`` is
      empty, sets ``desired`` and returns it; if missing and ``expected`` is non-empty,
      returns ``expected`` without writing; if the current value equals ``expected``,
      sets ``desired`` and returns it; otherwise returns the current value.
    - ``add`` treats a missing key as 0 and returns the new value (stored as decimal text).
    - Every call raises :class:`StoreConnectionError` once the server process is dead.
    """

    timeout: float

    @abc.abstractmethod
    async def set(self, key: str, value: bytes) -> None:
        """Write ``value`` under ``key``."""

    @abc.abstractmethod
    async def get(self, key: str) -> bytes:
        """Read ``key``, waiting for it to exist up to the client's timeout."""

    @abc.abstractmethod
    async def add(self, key: str, amount: int) -> int:
        """Atomically add to the integer under ``key``; return the new value."""

    @abc.abstractmethod
    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        """Atomic compare-and-set with c10d's semantics (see the class docstring)."""

    @abc.abstractmethod
    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        """Wait until every key exists; :class:`StoreTimeout` after ``timeout``
        (default: the client's timeout)."""

    @abc.abstractmethod
    async def check(self, keys: Sequence[str]) -> bool:
        """Whether every key exists, without waiting."""

    @abc.abstractmethod
    async def delete(self, key: str) -> bool:
        """Delete ``key``; whether it existed."""

    async def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        """Read every key in one request (c10d ``multi_get``), waiting for all of them to
        exist up to the client's timeout. This default, for a store without a batched
        request, reads them one at a time."""
        return [await self.get(k) for k in keys]

    def prefixed(self, prefix: str) -> Store:
        """A view of this store whose keys are ``prefix + '/' + key`` (c10d PrefixStore)."""
        return PrefixStore(self, prefix)


class PrefixStore(Store):
    """Keys of the wrapped store under ``prefix/``; shares the client and its timeout."""

    def __init__(self, inner: Store, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix
        self.timeout = inner.timeout

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    async def set(self, key: str, value: bytes) -> None:
        await self.inner.set(self._k(key), value)

    async def get(self, key: str) -> bytes:
        return await self.inner.get(self._k(key))

    async def add(self, key: str, amount: int) -> int:
        return await self.inner.add(self._k(key), amount)

    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        return await self.inner.compare_set(self._k(key), expected, desired)

    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        await self.inner.wait([self._k(k) for k in keys], timeout)

    async def check(self, keys: Sequence[str]) -> bool:
        return await self.inner.check([self._k(k) for k in keys])

    async def delete(self, key: str) -> bool:
        return await self.inner.delete(self._k(key))

    async def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        return await self.inner.multi_get([self._k(k) for k in keys])
