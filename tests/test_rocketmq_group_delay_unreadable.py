"""A ``config/subscriptionGroup.json`` or ``config/delayOffset.json`` that cannot be decoded (and no ``.bak``
that can) made ``segstore info`` fail (exit 1, the error alone), though ``info`` only shows what they hold
beside the store's topics, queues and files.

The broker refuses to start on either (rocketmq-all-4.9.7): ``ConfigManager.load`` decodes the file, then
``loadBak`` its ``.bak``; ``BrokerController.initialize`` gives up when ``SubscriptionGroupManager.load``
returns false, and ``DefaultMessageStore.load`` when ``ScheduleMessageService.load`` (``super.load()``,
then ``parseDelayLevel`` and ``correctDelayOffset``) does (``BrokerStartup`` exits -3 either way).  An
offline tool shows the rest: ``info`` answers (exit 0) with the error in ``group_configs_error`` /
``delay_offsets_error`` (as ``topic_configs_error``), and ``verify`` reports the file (exit 1).
"""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES, copy_writable

import segstore
from segstore.cli import main

DAMAGED_GROUPS = '{"subscriptionGroupTable":{"g":{"retryMaxTimes":"many"}}}'    # fastjson cannot cast it
DAMAGED_DELAY = '{"offsetTable":{"18":'                                        # cut: fastjson throws


def _store(tmp_path):
    """The basic fixture: three level-18 (2h) messages in ``SCHEDULE_TOPIC_XXXX`` queue 17, none delivered."""
    return copy_writable(FIXTURES / "rocketmq" / "basic" / "store", tmp_path / "store")


def test_info_answers_with_the_subscription_groups_error(tmp_path, capsys):
    store = _store(tmp_path)
    path = store / "config" / "subscriptionGroup.json"
    path.write_text(DAMAGED_GROUPS)
    said = f"{path}: expected retryMaxTimes of group 'g' (a Java int), found '\"many\"'"
    assert main(["info", str(store), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["group_configs"] == {} and info["group_configs_error"] == said
    assert info["queues"] and info["delay_queues"][0]["pending"] == 3    # the rest as without the damage
    assert "topic_configs_error" not in info and "delay_offsets_error" not in info
    assert main(["info", str(store)]) == 0
    assert f"group_configs_error: {said}\n" in capsys.readouterr().out
    assert main(["verify", str(store)]) == 1
    assert said in capsys.readouterr().out
    assert main(["dump", str(store)]) == 0
    capsys.readouterr()
    with segstore.open(store) as s:
        assert s.info()["group_configs_error"] == said
    # a .bak the broker loads instead: read from it, no error in info; verify still names the main file
    path.with_name(path.name + ".bak").write_text('{"subscriptionGroupTable":{"g":{"retryMaxTimes":3}}}')
    assert main(["info", str(store), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["group_configs"]["g"]["retryMaxTimes"] == 3 and "group_configs_error" not in info
    assert main(["verify", str(store)]) == 1
    assert "(the broker loads subscriptionGroup.json.bak instead)" in capsys.readouterr().out


def test_info_answers_with_the_delay_offsets_error(tmp_path, capsys):
    """What was delivered is not known, so neither what is left in each delay queue nor when it falls
    due: those are null (``-``), its offsets and delay level still shown."""
    store = _store(tmp_path)
    path = store / "config" / "delayOffset.json"
    path.write_text(DAMAGED_DELAY)
    said = f"{path}:{len(DAMAGED_DELAY)}: expected a fastjson document, found "
    assert main(["info", str(store), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["delay_offsets"] == {} and info["delay_offsets_error"].startswith(said)
    assert info["delay_queues"] == [{"topic": "SCHEDULE_TOPIC_XXXX", "queue_id": 17, "level": 18,
                                     "delay": "2h", "delivered_offset": None, "max_offset": 3,
                                     "pending": None, "next_due": None, "last_due": None}]
    assert "group_configs_error" not in info
    assert main(["info", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"delay_offsets_error: {said}" in out and "delivered_offset=-, max_offset=3, pending=-" in out
    assert main(["verify", "--json", str(store)]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert [(p["path"], p["pos"]) for p in problems] == [(str(path), len(DAMAGED_DELAY))]


@pytest.mark.parametrize("name", ["subscriptionGroup.json", "delayOffset.json"])
def test_a_readable_file_gives_no_error_field(tmp_path, capsys, name):
    store = _store(tmp_path)
    (store / "config" / name).write_text("{}")
    assert main(["info", str(store), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert not [key for key in info if key.endswith("_error")]
