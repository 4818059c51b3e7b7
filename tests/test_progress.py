"""Progress on long commands: a bar with total and ETA on a terminal, nothing in ``--json`` or piped output.

Through the real CLI: ``main()`` with stdout and stderr replaced by streams that say they are
terminals (what tqdm draws on), and a subprocess whose output is piped.  Plugins report through
:mod:`segstore.progress`; the CLI's one sink (``cli.progress_sink``) decides whether anything shows.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT, copy_writable

from segstore import cli, progress

KAFKA = FIXTURES / "kafka" / "uncompressed" / "topic-0"
ROCKETMQ = FIXTURES / "rocketmq" / "basic" / "store"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_terminal(monkeypatch, *argv: object) -> tuple[int, str, str]:
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    out = Terminal()
    code = cli.main([str(a) for a in argv], out)
    return code, out.getvalue(), err.getvalue()


def _bars(err: str, label: str) -> list[str]:
    """The last drawn state of each bar labelled ``label`` (tqdm redraws with carriage returns)."""
    return [part for part in err.replace("\r", "\n").splitlines() if part.startswith(label)]


@pytest.mark.parametrize("store", [KAFKA, ROCKETMQ], ids=["kafka", "rocketmq"])
def test_verify_and_recover_show_a_bar_with_total_on_a_terminal(tmp_path, monkeypatch, store):
    copy = copy_writable(store, tmp_path / store.name)
    for command in ("verify", "recover"):
        code, out, err = on_terminal(monkeypatch, command, copy)
        assert code == 0, err
        bars = _bars(err, command)
        assert bars, err
        assert any("100%" in b for b in bars), bars  # a total: the bar reaches it
        assert all("<" in b or "%" in b for b in bars)  # ETA / percentage shown, not a bare counter
        assert "%" not in out


def test_convert_shows_the_copy_and_the_verify_phase(tmp_path, monkeypatch):
    code, _, err = on_terminal(monkeypatch, "convert", ROCKETMQ, tmp_path / "k", "--to", "kafka", "--verify")
    assert code == 0, err
    assert any("100%" in b for b in _bars(err, "convert rocketmq -> kafka:"))  # the copy, with its total
    assert _bars(err, "convert rocketmq -> kafka: verify")


def test_write_and_index_build_show_bars(tmp_path, monkeypatch):
    lines = tmp_path / "in.jsonl"
    lines.write_text(
        "".join(json.dumps({"topic": "t", "partition": 0, "value": f"v{i}"}) + "\n" for i in range(50))
    )
    code, _, err = on_terminal(monkeypatch, "write", tmp_path / "t-0", "--input", lines, "--format", "kafka")
    assert code == 0, err
    assert any("100%" in b for b in _bars(err, "append to kafka"))
    assert any("100%" in b for b in _bars(err, "check in.jsonl"))
    part = copy_writable(KAFKA, tmp_path / "topic-0")
    code, _, err = on_terminal(monkeypatch, "index", "build", part, "--index", "key")
    assert code == 0, err
    assert any("100%" in b for b in _bars(err, "index build key"))


@pytest.mark.parametrize("fixture", [KAFKA.parent, ROCKETMQ.parent], ids=["kafka", "rocketmq"])
def test_write_spec_shows_a_bar_that_reaches_the_specs_total(tmp_path, monkeypatch, fixture):
    spec = json.loads((fixture / "spec.json").read_text())
    total = len(spec.get("messages", spec.get("batches", [])))
    target = tmp_path / ("topic-0" if "batches" in spec else "store")
    code, _, err = on_terminal(monkeypatch, "write", target, "--spec", fixture / "spec.json")
    assert code == 0, err
    bars = _bars(err, f"write {'kafka' if 'batches' in spec else 'rocketmq'} from spec.json")
    done = re.compile(rf"\b{total}(\.0)?/{total}(\.0)? ")  # tqdm's unit_scale writes 53 as 53.0
    assert any("100%" in b and done.search(b) for b in bars), bars


def test_no_bar_with_json_or_when_not_on_a_terminal(tmp_path, monkeypatch, capsys):
    copy = copy_writable(KAFKA, tmp_path / "topic-0")
    code, out, err = on_terminal(monkeypatch, "verify", copy, "--json")
    assert code == 0 and err == "" and json.loads(out)["ok"] is True
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "formats")])}
    done = subprocess.run(
        [sys.executable, "-m", "segstore.cli", "verify", str(copy)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == f"{copy}: ok\n"


def test_library_calls_show_nothing_unless_a_sink_is_installed(tmp_path):
    import segstore

    copy = copy_writable(KAFKA, tmp_path / "topic-0")
    seen: list[tuple[str, int | None, list[int]]] = []

    class Recorder:
        def open(self, what, total, unit):
            steps: list[int] = []
            seen.append((what, total, steps))

            class Shown:
                def update(self, n):
                    steps.append(n)

                def close(self):
                    pass

            return Shown()

    with segstore.open(copy) as store:
        assert store.verify() == [] and seen == []
        with progress.reporting(Recorder()):
            assert store.verify() == []
    ((what, total, steps),) = seen
    sizes = sorted(p.stat().st_size for p in copy.glob("*.log"))
    assert what == "verify" and total == sum(sizes) and sorted(steps) == sizes  # one step per segment
