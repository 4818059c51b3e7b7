"""``dump --json | write --input`` into a new RocketMQ store keeps its source's properties style.

Brokers up to 4.9.0 and from 5.2.0 end a message's properties with 0x02, 4.9.1 to 5.1.4 do not
(``MessageDecoder.messageProperties2String``; docs/rocketmq.md).  A dump line does not show the
separator, but its ``size`` does (one byte more with it).  Before, the copy took the destination's
``rocketmqVersion`` style: a store a 5.2 broker wrote, copied without ``--config rocketmqVersion``,
came back with every message a byte shorter, so every later ``physical_offset``, ``msg_id`` and commitlog
file end moved, with no word said.  Now an empty store takes the first line's style; a store that holds
messages keeps its own (``RocketMQStore.take_style``).
"""

from __future__ import annotations

import json

import pytest
from conftest import cli_run

import segstore


@pytest.mark.parametrize(("source", "destination"), [("5.2.0", None), ("4.9.7", "5.2.0"), ("4.9.0", "4.9.7")])
def test_a_copy_keeps_the_source_style_whatever_its_version(tmp_path, source, destination):
    src = tmp_path / "src"
    with segstore.open(src, format="rocketmq", mode="a", rocketmqVersion=source) as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": i % 2, "body": b"x%d" % i, "tags": "a",
                           "keys": [f"k{i}"]} for i in range(40)])
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"no properties"}])
    code, out, err = cli_run("dump", src, "--json")
    assert code == 0, err
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out, encoding="utf-8")
    copy = tmp_path / "copy"
    config = [] if destination is None else ["--config", f"rocketmqVersion={destination}"]
    code, _, err = cli_run("write", copy, "--input", dump, *config)
    assert code == 0, err
    name = "commitlog/00000000000000000000"
    assert (copy / name).read_bytes() == (src / name).read_bytes()
    assert cli_run("dump", copy, "--json")[1] == out


def test_a_store_that_holds_messages_keeps_its_style(tmp_path):
    """Appending a 5.2 store's dump to a 4.9.7-style store that holds messages writes them in its style,
    as any append to it does (its messages show the style; a mixed store is the broker's own doing)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    with segstore.open(src, format="rocketmq", mode="a", rocketmqVersion="5.2.0") as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"x", "tags": "a"}])
    with segstore.open(dst, format="rocketmq", mode="a", rocketmqVersion="4.9.7") as rmq:
        rmq.append_batch([{"topic": "T", "queue_id": 0, "body": b"y", "tags": "b"}])
    code, out, err = cli_run("dump", src, "--json")
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out, encoding="utf-8")
    code, _, err = cli_run("write", dst, "--input", dump)
    assert code == 0, err
    code, out, err = cli_run("dump", dst, "--json")
    sizes = [json.loads(line)["size"] for line in out.splitlines()]
    assert len(sizes) == 2 and sizes[0] == sizes[1], sizes
