"""An idle ``dump --follow`` on a Kafka log dir (issue 31's fixed costs): what one look costs where
nothing changed since the last, with the format's change marker (the look ``stat``s the files and
opens nothing) against the look that opens the store afresh (every look before the marker), in the
same run on the same log dir.

The log dirs hold one topic of :data:`PARTITIONS` partitions, 10 records each, built once under
``bench-data/follow/`` with their files' times set back a minute (a marker counts once the newest
file is a second old).  Per size, :data:`LOOKS` looks of a follower that has printed the store
already, each way, timed by CPU time (the follower's cost between prints; its wall time is that
plus the interval it sleeps); the row's ratio is the opening look's time over the marker's.

Run: ``bash scripts/bench.sh follow``.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

from .common import Report

PARTITIONS = (200, 1000)
LOOKS = int(os.environ.get("BENCH_FOLLOW_LOOKS", "20"))
DATA = Path(__file__).resolve().parent.parent / "bench-data" / "follow"


def build(partitions: int) -> Path:
    """A log dir of ``partitions`` partitions of topic ``t``, its files a minute old."""
    import segstore

    path = DATA / f"logdir_{partitions}"      # (not TOPIC-N: that names a partition dir)
    if not path.exists():
        with segstore.open(path, format="kafka", mode="a") as store:
            store.append_batch([{"topic": "t", "partition": p, "value": b"v" * 100}
                                for p in range(partitions) for _ in range(10)])
    when = time.time() - 60
    for directory, names, file_names in os.walk(path):
        for name in names + file_names:
            os.utime(os.path.join(directory, name), (when, when))
    return path


def per_look(path: Path, marker: bool) -> float:
    """CPU seconds of one idle look, the median of :data:`LOOKS`; ``marker`` False: the plugin gives
    none, so each look opens the store."""
    import statistics

    from segstore import cli, registry

    plugin = registry.get("kafka")
    if not marker:
        plugin.change_marker = lambda path: None     # type: ignore[method-assign]
    try:
        args = cli.build_parser().parse_args(["dump", "--json", "--follow", str(path)])
        args.path = args.paths[0]
        follower = cli._Follower(args)
        out = io.StringIO()
        follower.look_again(out)            # prints the store
        printed = out.tell()
        follower.look_again(out)            # the first look with a marker opens the store once more
        times = []
        for _ in range(LOOKS):
            start = time.process_time()
            follower.look_again(out)
            times.append(time.process_time() - start)
        if out.tell() != printed:
            raise SystemExit(f"an idle look printed {out.tell() - printed} more bytes")
        return statistics.median(times)
    finally:
        if not marker:
            del plugin.change_marker


def main() -> None:
    report = Report("follow")
    for partitions in PARTITIONS:
        path = build(partitions)
        per_look(path, True)                # warm: the page cache and the imports
        opening = per_look(path, False)
        marked = per_look(path, True)
        report.add(f"idle Kafka dump --follow look, {partitions:,} partitions", marked, "s CPU",
                   baseline="the look opening the store (s CPU)", baseline_value=opening,
                   higher_is_better=False,
                   note=f"no goal; medians of {LOOKS} looks, each after a look that printed the store; "
                        f"load {os.getloadavg()[0]:.1f}")
    report.save()


if __name__ == "__main__":
    main()
