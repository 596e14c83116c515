"""An in-memory store with c10d semantics whose calls never suspend, for tests that step
protocol code synchronously."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from elastic_sim.protocols.api import Store, StoreTimeout

T = TypeVar("T")


class MemStore(Store):
    """A dict; ``get``/``wait`` on a missing key raise StoreTimeout at once."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.timeout = 0.0
        self.ops = 0

    async def set(self, key: str, value: bytes) -> None:
        self.ops += 1
        self.data[key] = value

    async def get(self, key: str) -> bytes:
        self.ops += 1
        if key not in self.data:
            raise StoreTimeout(key)
        return self.data[key]

    async def add(self, key: str, amount: int) -> int:
        self.ops += 1
        value = int(self.data.get(key, b"0")) + amount
        self.data[key] = str(value).encode()
        return value

    async def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        self.ops += 1
        if key not in self.data:
            if expected == b"":
                self.data[key] = desired
                return desired
            return expected
        if self.data[key] == expected:
            self.data[key] = desired
            return desired
        return self.data[key]

    async def wait(self, keys: Sequence[str], timeout: float | None = None) -> None:
        self.ops += 1
        if any(k not in self.data for k in keys):
            raise StoreTimeout(",".join(keys))

    async def check(self, keys: Sequence[str]) -> bool:
        self.ops += 1
        return all(k in self.data for k in keys)

    async def delete(self, key: str) -> bool:
        self.ops += 1
        return self.data.pop(key, None) is not None


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends; error if it does."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("the coroutine suspended")
