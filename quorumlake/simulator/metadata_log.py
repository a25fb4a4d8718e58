"""The `__cluster_metadata` log of one cluster as a function of time: the active controller appends a NoOpRecord
every 500 ms (`metadata.max.idle.interval.ms`) plus batches of real writes, except during a stall."""

from __future__ import annotations

import bisect

from quorumlake.simulator.timeline import Window
from quorumlake.simulator.topology import Noise

NOOP_INTERVAL_MS = 500


class MetadataLog:
    def __init__(self, noise: Noise, start_ms: int, interval_ms: int, steps: int, stall: Window | None) -> None:
        self.base = noise.int(100_000, 900_000, "base-offset")
        # NoOpRecords at origin + 500 * j, j >= 1
        self.origin = start_ms - 3 * interval_ms - noise.int(0, NOOP_INTERVAL_MS - 1, "noop-phase")
        self.stall = stall
        self.write_times: list[int] = []
        self.write_totals: list[int] = []
        total = 0
        for k in range(-2, steps + 3):
            t = start_ms + k * interval_ms - interval_ms // 2 + noise.int(0, interval_ms // 4, "write-at", k)
            if stall is not None and stall.covers(t):
                continue
            burst = noise.int(0, 99, "burst", k) < 4
            total += noise.int(20, 90, "size", k) if burst else noise.int(0, 6, "size", k)
            self.write_times.append(t)
            self.write_totals.append(total)

    def _grid(self, t: int) -> int:
        """NoOp slots in (origin, t]."""
        return (t - self.origin) // NOOP_INTERVAL_MS if t > self.origin else 0

    def _noops(self, t: int) -> int:
        s = self.stall
        if s is None or t < s.start_ms:
            return self._grid(t)
        skipped = self._grid(min(t, s.end_ms - 1)) - self._grid(s.start_ms - 1)
        return self._grid(t) - skipped

    def _writes(self, t: int) -> int:
        i = bisect.bisect_right(self.write_times, t)
        return self.write_totals[i - 1] if i else 0

    def leo(self, t: int) -> int:
        """The leader's log end offset at time t (the next offset to be written)."""
        return self.base + self._noops(t) + self._writes(t)

    def last_append(self, t: int) -> int:
        """Time of the latest append at or before t."""
        slot = self.origin + NOOP_INTERVAL_MS * self._grid(t)
        s = self.stall
        if s is not None and s.covers(slot):
            slot = self.origin + NOOP_INTERVAL_MS * self._grid(s.start_ms - 1)
        i = bisect.bisect_right(self.write_times, t)
        write = self.write_times[i - 1] if i else self.origin
        return max(slot, write)

    def append_time_of(self, offset: int) -> int:
        """When the record at `offset` was appended (the first time the LEO passed it)."""
        lo, hi = self.origin, self.origin + NOOP_INTERVAL_MS
        if self.leo(lo) > offset:
            return lo
        while self.leo(hi) <= offset:
            hi = lo + 2 * (hi - lo)
        while hi - lo > 1:  # invariant: leo(lo) <= offset < leo(hi)
            mid = (lo + hi) // 2
            if self.leo(mid) > offset:
                hi = mid
            else:
                lo = mid
        return hi
