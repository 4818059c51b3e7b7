"""The segment map and the log manager, against plain-list oracles."""

import bisect
import random

import pytest

from segstore import segments
from segstore.log import SegmentedLog
from segstore.segments import SegmentMap


class Seg:
    def __init__(self, base):
        self.base = base
        self.flushed = 0
        self.closed = False

    def flush(self):
        self.flushed += 1

    def close(self):
        self.closed = True


@pytest.mark.parametrize("few", [segments.FEW, 0, 5, 40])
@pytest.mark.parametrize("seed", range(20))
def test_segment_map_random_actions(seed, few, monkeypatch):
    """Against the oracle, a map of few segments (a sorted list and a dict), of many (a SortedDict), and
    one that moves from the first to the second as it grows past ``FEW`` (then shrinks, as it stays)."""
    monkeypatch.setattr(segments, "FEW", few)
    rng = random.Random(seed)
    smap: SegmentMap[Seg] = SegmentMap()
    oracle: list[int] = []
    max_len = 0
    for _ in range(300):
        action = rng.random()
        if action < 0.4:
            base = rng.randrange(0, 10_000)
            if base not in oracle:
                bisect.insort(oracle, base)
            smap.add(base, Seg(base))
            max_len = max(max_len, len(oracle))
        elif action < 0.5 and oracle:
            base = rng.choice(oracle)
            oracle.remove(base)
            assert smap.remove(base).base == base
        else:
            x = rng.randrange(-5, 10_005)
            i = bisect.bisect_right(oracle, x)
            assert (smap.floor(x) and smap.floor(x).base) == (oracle[i - 1] if i else None)
            j = bisect.bisect_left(oracle, x)
            assert (smap.lower(x) and smap.lower(x).base) == (oracle[j - 1] if j else None)
            assert (smap.higher(x) and smap.higher(x).base) == (oracle[i] if i < len(oracle) else None)
            y = x + rng.randrange(0, 3000)
            expected = [b for b in oracle if b < y and (b >= x or b == (oracle[i - 1] if i else None))]
            assert [s.base for s in smap.values(x, y)] == expected
            assert smap.floor_base(x) == (oracle[i - 1] if i else None)
            assert (x in smap) == (x in oracle)
            assert (smap.get(x) and smap.get(x).base) == (x if x in oracle else None)
            if x not in oracle:
                with pytest.raises(KeyError):
                    smap.remove(x)
        smap._check()
        assert type(smap._map).__name__ == ("_Few" if few >= max_len else "SortedDict")
        assert smap.bases() == oracle == [s.base for s in smap] == [s.base for s in smap.values()] == \
            [b for b, s in smap.items() if s.base == b] and len(smap) == len(oracle)
        assert (smap.active and smap.active.base) == (oracle[-1] if oracle else None)
        assert (smap.first and smap.first.base) == (oracle[0] if oracle else None)
    smap.clear()
    assert smap.bases() == [] and smap.active is None and smap.first is None and smap.floor(10**6) is None


def test_log_roll_flush_truncate_retention():
    log = SegmentedLog(Seg)
    first = log.roll(0)
    log.mark_dirty(first)
    second = log.roll(100)
    assert first.flushed == 1  # rolling flushes the old segment
    log.mark_dirty(second)
    log.flush()
    assert second.flushed == 1
    log.flush()
    assert second.flushed == 1  # nothing dirty: nothing flushed
    log.roll(200)
    log.roll(300)
    assert log.segment_for(250).base == 200
    removed = log.truncate_after(150)
    assert [s.base for s in removed] == [200, 300] and all(s.closed for s in removed)
    assert log.active.base == 100
    log.roll(400)
    dropped = log.delete_oldest(lambda s: s.base >= 100)
    assert [s.base for s in dropped] == [0]
    dropped = log.delete_oldest(lambda s: False)
    assert [s.base for s in dropped] == [100]  # the active segment always stays
    assert log.segments.bases() == [400]
