"""The c10d rendezvous backend: the whole state under one store key, written only by
compare-and-set, with a sentinel standing for "no state" (a ``get`` on a missing key
would block)."""

from __future__ import annotations

import base64
import binascii
from collections import OrderedDict

from elastic_sim.protocols.api import Store, StoreError
from elastic_sim.protocols.torchelastic.memo import WriteMemo
from elastic_sim.protocols.torchelastic.ops import RendezvousConnectionError, RendezvousStateError

NULL_SENTINEL = b"Y2FuaW1hZGFt"


class C10dBackend:
    """Upstream's ``C10dRendezvousBackend`` over a :class:`elastic_sim.protocols.api.Store`.

    The token of a state is the entire stored base64 value; a write's success is deduced
    from byte equality of what the store returns with what was written."""

    name = "c10d"

    def __init__(self, store: Store, run_id: str, written: WriteMemo[bytes] | None = None
                 ) -> None:
        if not run_id:
            raise ValueError("The run id must be a non-empty string.")
        self.store = store
        self.key = "torch.rendezvous." + run_id
        self.written: WriteMemo[bytes] = WriteMemo() if written is None else written
        """Stored value -> state bytes, for the values written through this backend or
        through those it shares the memo with
        (:class:`~elastic_sim.protocols.torchelastic.executor.WrittenMemos`)."""

    async def init(self) -> None:
        """Install the sentinel if no state exists yet (upstream does it in __init__)."""
        await self._call(self.store.compare_set(self.key, b"", NULL_SENTINEL))

    async def get_state(self) -> tuple[bytes, bytes] | None:
        """(state bytes, token), or None when no state was ever written."""
        return self._decode(await self._call(self.store.get(self.key)))

    async def set_state(
        self, state: bytes, token: bytes | None
    ) -> tuple[bytes, bytes, bool] | None:
        """Write ``state`` if ``token`` is still current; return what is stored now."""
        expected = token if token else NULL_SENTINEL
        value = base64.b64encode(state)
        self.written.hold(value, state)
        current: bytes | None = None
        try:
            current = await self._call(self.store.compare_set(self.key, expected, value))
        finally:
            # `is`: the simulator's store hands it back
            self.written.settle(value, current is value)
        pair = self._decode(current)
        if pair is None:
            return None
        new_state, new_token = pair
        return new_state, new_token, new_state == state

    @staticmethod
    async def _call(aw: object) -> bytes:
        try:
            return await aw  # type: ignore[misc, no-any-return]
        except StoreError as exc:
            raise RendezvousConnectionError(
                f"The connection to the C10d store has failed: {exc}"
            ) from exc

    def _decode(self, value: bytes) -> tuple[bytes, bytes] | None:
        if value == NULL_SENTINEL:
            return None
        known = self.written.get(value)
        if known is not None:
            return known, value
        bits = _B64_DECODED.get(value)
        if bits is None:
            try:
                bits = base64.b64decode(value, validate=True)
            except binascii.Error as exc:
                raise RendezvousStateError("The state object is corrupt.") from exc
            _B64_DECODED[value] = bits
            if len(_B64_DECODED) > _B64_CACHE_SIZE:
                _B64_DECODED.popitem(last=False)
        return bits, value


_B64_CACHE_SIZE = 64
_B64_DECODED: OrderedDict[bytes, bytes] = OrderedDict()
"""Stored value -> decoded bytes, for the latest few values: every node polls the same
stored value again and again (bytes are immutable, so sharing them is safe)."""
