"""The crash suite (issue 15): writers of both formats killed with SIGKILL, the store checked after each kill.

A writer (``tests/crash_writer.py``) opens, appends and closes its store in cycles,
so a kill lands while opening (with the recovery of the previous kill), appending,
rolling a file or closing.  Half the kills come after a random number of
acknowledgements, half a random 0-250 ms after the writer said it opens the store
(its first to third open: the recovery of the last kill, a later open, the appends
after it).  ``phase`` is the writer's last word before the kill (an approximation of
where it landed: the writer goes on while the signal is on its way).  After every kill the
store is opened read-only in this process and:

- it opens and reads (a store left that cannot be opened is ``unopenable``; only a directory the
  first writer was killed making, nothing acknowledged and no file yet that makes it a store, may
  hold no store);
- what it holds is exactly messages ``0..n-1`` in order (``not prefix`` otherwise);
- every acknowledged message is among them (``lost`` counts those missing).

Every ``--rotate`` kills a fresh store starts; before that the last store is
opened for appending (recovery), closed, and must then verify clean with every
queue / partition read equal to its messages.

Figures for ``docs/reliability.md``::

    scripts/crash.sh KILLS [SEED [JOBS]]       # python -m tests.crash --kills KILLS ...

Thread-safety: each job works in its own temporary directories.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import segstore
from segstore.errors import NotFoundError, SegstoreError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from crash_writer import CONFIGS, QUEUES, TOPICS, body, count  # noqa: E402

WRITER = HERE / "crash_writer.py"
FORMATS = ("rocketmq", "kafka")
#: How long a writer may run before the harness gives up on its kill point (it is killed anyway).
WRITER_LIMIT_S = 20.0


def _read(fmt: str, path: str) -> list[bytes]:
    """The message bodies of the store in message order (RocketMQ: commitlog order)."""
    with segstore.open(path, format=fmt, mode="r", **CONFIGS[fmt]) as store:
        if fmt == "rocketmq":
            return [m.body for m in store.scan()]
        topic = TOPICS[fmt]
        if topic not in store.topics():
            return []
        return [bytes(m.value) for m in store.read(topic, 0)]


def _final_check(fmt: str, path: str) -> list[str]:
    """Recover (open for appending), close, then verify and read every queue; the problems found."""
    problems: list[str] = []
    try:
        with segstore.open(path, format=fmt, mode="a", **CONFIGS[fmt]):
            pass
        with segstore.open(path, format=fmt, mode="r", **CONFIGS[fmt]) as store:
            problems += [f"verify: {p}" for p in store.verify()]
            n = count(store, fmt)
            topic = TOPICS[fmt]
            bodies = _read(fmt, path)
            if n and bodies != [body(i) for i in range(n)]:
                at = next((i for i, b in enumerate(bodies) if i >= n or b != body(i)), len(bodies))
                problems.append(f"expected messages 0..{n - 1} in order, found {len(bodies)}, "
                                f"message {at} differs")
            for q in store.partitions(topic) if n else []:
                got = [bytes(m.body if fmt == "rocketmq" else m.value) for m in store.read(topic, q, 0)]
                want = [body(i) for i in range(n) if i % QUEUES[fmt] == q]
                if got != want:
                    problems.append(f"queue {q}: read {len(got)} messages, expected {len(want)}")
    except SegstoreError as err:
        problems.append(f"{type(err).__name__}: {err}")
    return problems


def _one_kill(fmt: str, path: str, rng: random.Random, seed: int, made: bool) -> dict:
    """Start a writer, kill it, check the store; the kill's record (``made``: an earlier kill left a
    store at ``path``; ``store`` in the record: this one did)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE.parent / "formats"),
                                                       *sys.path]))
    proc = subprocess.Popen([sys.executable, str(WRITER), fmt, path, str(seed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    by_acks = rng.random() < 0.5
    acks_wanted = rng.randint(1, 150)
    opens_wanted = rng.randint(1, 3)        # or: killed a moment after the writer's n-th "o" (open)
    delay = rng.uniform(0.0, 0.25)
    deadline = None
    acked: set[int] = set()
    phase = "start"
    opens = 0
    started = time.monotonic()
    buf = b""
    assert proc.stdout is not None and proc.stderr is not None
    try:
        while True:
            now = time.monotonic()
            if (deadline is not None and now >= deadline) or now - started > WRITER_LIMIT_S:
                break
            wait = (deadline if deadline is not None else started + WRITER_LIMIT_S) - now
            ready, _, _ = select.select([proc.stdout], [], [], max(wait, 0.0))
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break           # the writer ended on its own: a failure (reported below)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                parts = line.split()
                if parts[0] == b"a":
                    acked.update(range(int(parts[1]), int(parts[2])))
                    phase = "append"
                elif parts[0] == b"o":
                    phase = "open"
                    opens += 1
                    if not by_acks and opens == opens_wanted:
                        deadline = time.monotonic() + delay
                else:
                    phase = "close"
            if by_acks and len(acked) >= acks_wanted:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        err = proc.stderr.read().decode(errors="replace")
        proc.stdout.close()
        proc.stderr.close()
    record: dict = {"format": fmt, "phase": phase, "acked": len(acked), "lost": 0, "outcome": "ok"}
    if proc.returncode != -signal.SIGKILL:
        record.update(outcome="writer failed", detail=err[-2000:])
        return record
    try:
        bodies = _read(fmt, path) if os.path.exists(path) else []    # killed before it made the store
    except SegstoreError as exc:
        if made or acked or not isinstance(exc, NotFoundError):
            record.update(outcome="unopenable", detail=f"{type(exc).__name__}: {exc}")
            return record
        bodies = []     # killed while making the store, before the file that makes it one
    else:
        record["store"] = os.path.exists(path)
    if bodies != [body(i) for i in range(len(bodies))]:
        at = next(i for i, b in enumerate(bodies) if b != body(i))
        record.update(outcome="not prefix", detail=f"message {at} of {len(bodies)} is {bodies[at][:20]!r}")
    record["lost"] = len([i for i in acked if i >= len(bodies)])
    if record["lost"]:
        record["outcome"] = "lost"
    return record


def run_job(args: tuple[str, int, int, int, str | None]) -> list[dict]:
    """``kills`` kills of ``fmt``'s writer from seed ``seed``, a fresh store every ``rotate`` kills
    (a copy of the store after each kill that went wrong kept under ``keep``, if given)."""
    fmt, kills, seed, rotate, keep = args
    rng = random.Random(f"{seed}-{fmt}")
    records: list[dict] = []
    with tempfile.TemporaryDirectory(prefix=f"crash-{fmt}-") as tmp:
        path = ""
        for k in range(kills):
            if k % rotate == 0:
                if path:
                    _finish(records[-1], fmt, path, keep, f"{fmt}-{seed}-{k - 1}")
                path = os.path.join(tmp, f"store{k // rotate}")
            before = os.path.join(tmp, "before")
            if keep:
                shutil.rmtree(before, ignore_errors=True)
                if os.path.exists(path):
                    shutil.copytree(path, before)
            made = any(r.get("store") for r in records[k - k % rotate:])
            records.append(_one_kill(fmt, path, rng, rng.randrange(1 << 30), made))
            if keep and records[-1]["outcome"] != "ok" and os.path.exists(path):
                where = os.path.join(keep, f"{fmt}-{seed}-{k}")
                shutil.copytree(path, os.path.join(where, "after"))
                if os.path.exists(before):
                    shutil.copytree(before, os.path.join(where, "before"))
                records[-1]["kept"] = where
        if path:
            _finish(records[-1], fmt, path, keep, f"{fmt}-{seed}-{kills - 1}")
    return records


def _finish(record: dict, fmt: str, path: str, keep: str | None, name: str) -> None:
    """The final check of the store at ``path`` into ``record``; under ``keep``, a copy of the store as
    the kills left it (before the check's recovery; if they left one) when the check fails."""
    left = os.path.join(keep, name, "before-final") if keep and os.path.exists(path) else None
    if left:
        shutil.copytree(path, left)
    record["final"] = _final_check(fmt, path)
    if left and record["final"]:
        record["kept"] = os.path.dirname(left)
    elif left:
        shutil.rmtree(left)
        if not os.listdir(os.path.dirname(left)):    # the last kill's own copies, if it went wrong, stay
            os.rmdir(os.path.dirname(left))


def summarize(records: list[dict], seconds: float) -> str:
    """The figures as a Markdown table (kills, where they landed, acknowledged, lost, outcomes)."""
    lines = ["| format | kills | while opening | while appending | while closing | before the first "
             "line | acknowledged | lost | outcomes | final checks failed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for fmt in FORMATS:
        mine = [r for r in records if r["format"] == fmt]
        if not mine:
            continue
        phases = collections.Counter(r["phase"] for r in mine)
        outcomes = collections.Counter(r["outcome"] for r in mine)
        finals = [r for r in mine if r.get("final")]
        acked, lost = sum(r["acked"] for r in mine), sum(r["lost"] for r in mine)
        lines.append(f"| {fmt} | {len(mine)} | {phases['open']} | {phases['append']} | {phases['close']} | "
                     f"{phases['start']} | {acked} | {lost} | "
                     + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) + f" | {len(finals)} |")
    lines.append("")
    lines.append(f"{len(records)} kills in {seconds:.0f} s.")
    for r in records:
        if r["outcome"] != "ok" or r.get("final"):
            lines.append(f"- {r['format']} {r['outcome']} after phase {r['phase']}: "
                         f"{r.get('detail', '')[-800:]} {r.get('final', '')} {r.get('kept', '')}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=1000, help="kills in all, shared by the formats")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rotate", type=int, default=50, help="kills per store")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--out", help="write the summary here too")
    parser.add_argument("--keep", help="keep a copy of each store a kill left wrong (and of it before) here")
    args = parser.parse_args(argv)
    formats = args.formats.split(",")
    per_job = []
    jobs_per_format = max(1, args.jobs // len(formats)) if args.jobs >= len(formats) else 1
    for fmt in formats:
        share = args.kills // len(formats)
        for j in range(jobs_per_format):
            n = share // jobs_per_format + (1 if j < share % jobs_per_format else 0)
            per_job.append((fmt, n, args.seed * 100 + j, args.rotate, args.keep))
    started = time.monotonic()
    with multiprocessing.Pool(args.jobs) as pool:
        records = [r for job in pool.map(run_job, per_job) for r in job]
    text = summarize(records, time.monotonic() - started)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    bad = [r for r in records if r["outcome"] != "ok" or r.get("final")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
