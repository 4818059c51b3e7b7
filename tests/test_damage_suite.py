"""The seeded corruption suite, bounded for CI (issue 15): ``CASES`` damaged copies of the
compat fixtures, every command of ``damage.COMMANDS`` in a fresh process on each, over two
processes.  No traceback, signal or hang; ``recover`` never loses an intact record nor invents
one.  The long run is ``python -m tests.damage`` (``scripts/damage.sh``, ``docs/reliability.md``).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import signal
import subprocess
import sys

import damage
import pytest

SEED = 20261123
CASES = 40
JOBS = 2
# Findings of this seed not fixed yet: case number -> what it shows.  Each runs as a strict
# xfail below, so a fix shows up as an XPASS failure and the entry must be removed.
KNOWN: dict[int, str] = {}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[int, damage.Result]:
    workdir = tmp_path_factory.mktemp("damage")
    done = damage.run_many(SEED, list(range(CASES)), JOBS, workdir)
    return {res.case.number: res for res in done}


def test_every_case_ends_in_a_typed_error_or_success(results):
    failures = {n: res.bad() for n, res in results.items() if n not in KNOWN and res.bad()}
    assert not failures, "\n".join(
        f"case {n} ({results[n].case.fmt}/{results[n].case.source} {results[n].case.target} "
        f"{results[n].case.mutation} {results[n].case.detail}): {lines} -- "
        f"python -m tests.damage --seed {SEED} --case {n}" for n, lines in failures.items())


def test_the_suite_covers_commands_and_damages_something(results):
    runs = [run for res in results.values() for run in res.runs]
    assert {run.command for run in runs} >= set(damage.COMMANDS)
    # the damage is seen: some runs end in a typed error, and the mutations differ
    assert sum(run.outcome == "typed" for run in runs) > len(results)
    assert len({res.case.mutation for res in results.values()}) >= 6
    assert len({res.case.kind for res in results.values()}) >= 6


@pytest.mark.parametrize("fmt, fixture", [("kafka", "kafka/gzip/topic-0"),
                                          ("rocketmq", "rocketmq/basic/store")])
def test_each_command_runs_whole_on_an_undamaged_store_under_the_limits(tmp_path, fmt, fixture):
    """What the suite sees of damage is the command's answer to it, not the harness's limits: on an
    undamaged fixture every command ends in success (a conversion from Kafka wrote a RocketMQ store of
    the broker's default sizes, whose 1 GiB commitlog map passed the address-space limit: every
    Kafka case's convert stopped at ENOMEM)."""
    store = tmp_path / "source" / fixture.rsplit("/", 1)[1]     # a partition directory keeps its name
    damage._writable_copy(damage.FIXTURES / fixture, store)
    rc, records, err = damage.dump_records(str(store))
    assert rc == 0 and records, err
    middle = damage.middle_time(fmt, records)
    for command in damage.COMMANDS:
        rc, out, err = damage.run_command(damage.argv_for(command, fmt, str(store), str(tmp_path / command),
                                                          middle))
        assert rc == 0, f"{command}: {err[-500:]}"
        if command == "window":     # from the middle record on: some of the records, not none or all
            assert 0 < len(out.splitlines()) < len(records)


if KNOWN:  # defined only while findings remain, so an empty list is no silent skip
    @pytest.mark.parametrize("number", [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=f"issue 15: {why}"))
        for n, why in sorted(KNOWN.items())])
    def test_known_findings(results, number):
        assert not results[number].bad()


def test_cases_are_reproducible_from_seed_and_number(tmp_path):
    state = damage._pristine(tmp_path)
    first = [damage.plan_case(7, n, state["stores"]) for n in range(30)]
    again = [damage.plan_case(7, n, state["stores"]) for n in range(30)]
    assert first == again
    assert len({(c.target, c.mutation) for c in first}) > 20


@pytest.mark.parametrize("mutation", damage.MUTATIONS + damage.EXTRA_MUTATIONS)
def test_each_mutation_changes_the_target(tmp_path, mutation):
    state = damage._pristine(tmp_path)
    store = state["stores"][("kafka", "uncompressed")]
    case = damage.Case(3, 1, "kafka", "uncompressed", "topic-0/00000000000000000000.log", "log", mutation)
    work = tmp_path / "work"
    shutil.copytree(store, work)
    before = (work / case.target).read_bytes()
    damage.apply_mutation(case, work, damage._original(state, ("kafka", "uncompressed")), {
        "rocketmq": state["stores"][("rocketmq", "basic")], "kafka": store})
    target = work / case.target
    assert target.is_symlink() or not target.is_file() or target.read_bytes() != before
    assert case.damage_pos is not None


@pytest.mark.parametrize(("rc", "stderr", "stdout", "outcome"), [
    (0, "", "", "ok"),
    (1, "/s/commitlog/0:208: expected a message, found 0\n", "", "typed"),
    (1, "", "/s/00.log:61: expected a CRC of 1, found 2\n", "typed"),
    (1, "something went wrong\n", "", "untyped"),
    (2, "/s: not a store of any known format\n", "", "usage"),
    (1, "Traceback (most recent call last):\n  File x\nKeyError: 1\n", "", "traceback"),
    (-signal.SIGSEGV, "", "", "signal"),
    (None, "", "", "hang"),
    (3, "", "", "other"),
])
def test_classify(rc, stderr, stdout, outcome):
    assert damage.classify(rc, stderr, stdout) == outcome


@pytest.fixture(params=["forked", "fresh"])
def way(request, monkeypatch):
    """Each command forked from the warm server, or in a fresh interpreter (``SEGSTORE_DAMAGE_FRESH``)."""
    if request.param == "fresh":
        monkeypatch.setenv("SEGSTORE_DAMAGE_FRESH", "1")
    else:
        monkeypatch.delenv("SEGSTORE_DAMAGE_FRESH", raising=False)
    return request.param


def test_classify_a_real_traceback_signal_and_hang(way):
    crash = damage.run_command(["-c", "raise KeyError(1)"])
    assert damage.classify(crash[0], crash[2], crash[1]) == "traceback"
    killed = damage.run_command(["-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"])
    assert damage.classify(killed[0], killed[2]) == "signal"
    hung = damage.run_command(["-c", "import time; time.sleep(30)"], timeout=1)
    assert damage.classify(hung[0], hung[2]) == "hang"
    # the address-space limit holds: a 3 GiB buffer fails
    big = damage.run_command(["-c", "b = bytearray(3 << 30)"])
    assert big[0] != 0 and "MemoryError" in big[2]
    exited = damage.run_command(["-c", "import sys; print('out'); sys.exit('a message')"])
    assert exited == (1, "out\n", "a message\n")


def _answers(result: damage.Result) -> list[tuple]:
    """What each run of a case answered, its scratch directory's random name, a conversion's timing and
    a segment file's mtime (a Kafka time lookup names it where no record time is known; each run copies
    the case's files anew) left out."""
    def plain(text: str) -> str:
        text = re.sub(r"its file's mtime, -?\d+, taken", "its file's mtime, MTIME, taken", text)
        return re.sub(r" in [\d.]+s \(\d+ msg/s\)", "", re.sub(r"case\d+-[^/]+", "CASE", text))

    return [(run.command, run.outcome, run.rc, plain(run.stdout), plain(run.stderr)) for run in result.runs] \
        + [plain(finding) for finding in result.findings]


def test_a_forked_run_answers_as_a_fresh_interpreter(tmp_path, monkeypatch):
    """The fork server is only faster: the same exit status, stdout and stderr, command by command,
    as a fresh ``python -m segstore.cli`` on the same damaged stores (cases of both formats, with
    damage some commands refuse and some recover from)."""
    numbers = [0, 4]
    monkeypatch.delenv("SEGSTORE_DAMAGE_FRESH", raising=False)
    forked = [damage.run_case(SEED, n, tmp_path) for n in numbers]
    monkeypatch.setenv("SEGSTORE_DAMAGE_FRESH", "1")
    fresh = [damage.run_case(SEED, n, tmp_path) for n in numbers]
    assert {res.case.fmt for res in forked} == {"kafka", "rocketmq"}
    assert {run.outcome for res in forked for run in res.runs} >= {"ok", "typed"}
    assert [_answers(res) for res in forked] == [_answers(res) for res in fresh]


def test_recover_check_sees_invented_and_lost_records(tmp_path):
    state = damage._pristine(tmp_path)
    store = state["stores"][("rocketmq", "basic")]
    original = damage._original(state, ("rocketmq", "basic"))
    case = damage.Case(1, 1, "rocketmq", "basic", "commitlog/00000000000000000000", "commitlog", "truncate",
                       damage_pos=1 << 20)
    assert damage.recover_findings(case, original, str(store))[0] == []
    fewer = original[1:]  # the store now holds a record the "original" lacks
    assert any("invented" in f for f in damage.recover_findings(case, fewer, str(store))[0])
    ghost = copy.deepcopy(original[0])
    ghost["body"] = "Z2hvc3Q="
    assert any("lost 1" in f for f in damage.recover_findings(case, [*original, ghost], str(store))[0])


def test_the_long_run_command_writes_a_summary(tmp_path):
    out = tmp_path / "summary.md"
    done = subprocess.run([sys.executable, "-m", "tests.damage", "--seed", str(SEED), "--case", "0",
                           "--jobs", "1", "--out", str(out)], capture_output=True, text=True,
                          cwd=damage.ROOT, env=damage._env(), timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr
    text = out.read_text()
    assert "| outcome |" in text and "1 cases" in text


def test_silent_pass_is_seen_when_verify_is_clean_and_dump_differs():
    original = [{"offset": 0, "value": "YQ=="}, {"offset": 1, "value": "Yg=="}]
    same = "\n".join(json.dumps(r) for r in original)
    changed = same.replace("Yg==", "Yw==")

    def runs(verify_rc: int, dump_out: str) -> list[damage.Run]:
        return [damage.Run("dump", "ok", 0, dump_out, ""), damage.Run("verify", "ok", verify_rc, "", "")]

    assert damage._silent(runs(0, changed), original)
    assert not damage._silent(runs(0, same), original)
    assert not damage._silent(runs(1, changed), original)  # verify saw it


def test_recover_check_sees_bytes_changed_without_keeping(tmp_path):
    """Issue 28: recover deleted a trailing commitlog file holding data and zeroed nothing it kept; the
    harness now compares every message file before and after recover with what ``.cut-`` files hold."""
    state = damage._pristine(tmp_path)
    store = tmp_path / "copy"
    shutil.copytree(state["stores"][("rocketmq", "abort")], store)
    before = damage.message_files("rocketmq", store)
    first = store / "commitlog" / f"{0:020d}"
    raw = bytearray(first.read_bytes())
    kept = bytes(raw[100:300])
    raw[100:300] = bytes(200)
    first.write_bytes(bytes(raw))
    assert damage.unkept("rocketmq", before, store) == [
        f"changed {sum(b != 0 for b in kept)} bytes of commitlog/{first.name} from "
        f"{100 + next(i for i, b in enumerate(kept) if b)} without keeping them"]
    aside = store / ".segstore" / "cut" / "commitlog"
    aside.mkdir(parents=True)
    (aside / f"{first.name}.cut-100").write_bytes(kept)
    assert damage.unkept("rocketmq", before, store) == []
    (store / "commitlog" / f"{196608:020d}").unlink()      # a file holding messages
    assert damage.unkept("rocketmq", before, store)[0].startswith("changed ")


def test_the_extra_mutations_leave_the_other_cases_of_a_seed_as_they_were(tmp_path):
    state = damage._pristine(tmp_path)
    cases = [damage.plan_case(20261124, n, state["stores"]) for n in range(200)]
    extra = [c for c in cases if c.mutation in damage.EXTRA_MUTATIONS]
    assert 20 < len(extra) < 80 and {c.mutation for c in extra} == set(damage.EXTRA_MUTATIONS)
    case = cases[68]          # test_damage_regressions.py: test_recover_exit_0_means_the_store_dumps_after_it
    assert (case.fmt, case.source, case.mutation) == ("kafka", "lz4", "bitflip")
