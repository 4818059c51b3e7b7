"""The documentation a user reads on their own: every command with an example, every page in the README's
table, and nothing that points outside the repository (a path a user does not have, an issue number)."""

from __future__ import annotations

import argparse
import re

import pytest
from conftest import ROOT

from segstore.cli import build_parser

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _commands() -> list[str]:
    """Every subcommand (and ``index`` subcommand) ``segstore --help`` lists."""
    names = []
    for action in build_parser()._actions:  # argparse has no public way to walk its subparsers
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                names.append(name)
                for inner in sub._actions:
                    if isinstance(inner, argparse._SubParsersAction):
                        names += [f"{name} {child}" for child in inner.choices]
    return names


def _examples() -> str:
    text = (ROOT / "docs" / "cli.md").read_text()
    start = text.index("## Examples, command by command")
    return text[start:text.index("\n## ", start + 1)]


@pytest.mark.parametrize("command", _commands())
def test_every_command_of_help_has_an_example_in_cli_md(command):
    assert re.search(rf"^segstore {re.escape(command)}\b", _examples(), re.MULTILINE), command


def test_the_readmes_table_lists_every_page():
    readme = (ROOT / "README.md").read_text()
    for page in DOCS:
        assert f"[docs/{page.name}](docs/{page.name})" in readme, page.name


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_points_outside_the_repository_or_at_an_issue(page):
    text = page.read_text()
    assert "../shared" not in text and "ANCHORS.md" not in text
    assert not re.search(r"\bissues? \d+", text, re.IGNORECASE), re.findall(r".*\bissues? \d+.*", text, re.I)
    for target, _anchor in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        assert (page.parent / target).resolve().exists(), f"{page.name}: {target}"


def _section(page: str, heading: str) -> str:
    """The text of ``page`` under ``heading`` up to the next heading of its level."""
    text = (ROOT / "docs" / page).read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find(f"\n{heading.split()[0]} ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def _first_column(section: str) -> set[str]:
    """The backticked names of the first column of a section's tables."""
    return {name for line in section.splitlines() if line.startswith("| `")
            for name in re.findall(r"`([^`]+)`", line.split("|")[1])}


def test_kafka_md_lists_every_topic_config_the_plugin_takes_and_no_other():
    """Its table is the names ``KafkaConfig`` sets (``max.message.bytes`` was missing); the names taken
    and ignored (``BROKER_ONLY``) are named in the section."""
    from dataclasses import fields

    from segstore_kafka.partition import BROKER_ONLY, KafkaConfig

    section = _section("kafka.md", "## Config names")
    assert _first_column(section) == {f.name.replace("_", ".") for f in fields(KafkaConfig)}
    named = set(re.findall(r"`([a-z0-9.]+)`", section))
    assert {name.replace("_", ".") for name in BROKER_ONLY} <= named


def test_rocketmq_md_lists_every_config_name_the_plugin_takes_and_no_other():
    """Its table is the names ``BrokerConfig`` sets, plus broker.conf's ``brokerIP1``/``listenPort`` for
    ``storeHost`` (``transactionTimeOut``, ``transactionCheckMax`` and ``autoMessageVersionOnTopicLen``
    were missing); the names taken and ignored, or taken at their default only, are named below it."""
    from dataclasses import fields

    from segstore_rocketmq.config import DEFAULT_ONLY, IGNORED, BrokerConfig

    section = _section("rocketmq.md", "## Config names")
    table, rest = section.split("### Broker names taken and ignored", 1)
    assert _first_column(table) == {f.name for f in fields(BrokerConfig)} | {"brokerIP1", "listenPort"}
    named = set(re.findall(r"`([A-Za-z0-9]+)`", rest))
    assert set(IGNORED) | set(DEFAULT_ONLY) <= named


def _keys_named(text: str) -> list[str]:
    return [name.strip() for name in text.replace("\n", " ").split(",")]


def test_kafka_md_names_every_key_of_dump_json():
    """The keys of a ``dump --json`` line and of its ``batch`` object, as kafka.md lists them
    (``base_timestamp`` and ``delete_horizon_ms`` were missing)."""
    import json

    import segstore

    text = (ROOT / "docs" / "kafka.md").read_text()
    paragraph = text[text.index("`dump --json` keys: "):]
    paragraph = paragraph[:paragraph.index("Control records are included")]
    top = re.match(r"`dump --json` keys: `([^`]+)`", paragraph)
    batch = re.search(r"`batch` \(`([^`]+)`", paragraph)
    assert top and batch
    with segstore.open(ROOT / "compat_fixtures" / "kafka" / "txn" / "topic-0") as store:
        line = json.loads(b"".join(bytes(block) for block in store.dump_json()).splitlines()[0])
    assert list(line) == [*_keys_named(top.group(1)), "headers", "batch"]
    assert list(line["batch"]) == _keys_named(batch.group(1))


def test_rocketmq_md_names_every_key_of_dump_json(tmp_path):
    """``dump --json``'s "exactly the keys" of a RocketMQ message (one without a consume-queue extension
    unit, ``ext``), then ``properties_base64`` for a message whose stored properties are not UTF-8 only."""
    import json

    import segstore

    section = _section("rocketmq.md", "## `dump --json`")
    listed = re.search(r"with exactly the keys\n`([^`]+)` \(base64\), `properties` \([^)]*\), "
                       r"`tags` \([^)]*\), `keys` \(list\), `([^`]+)`, then\n`(properties_base64)` for a "
                       r"message whose stored properties are not UTF-8", section)
    assert listed
    keys = [*_keys_named(listed.group(1)), "properties", "tags", "keys", *_keys_named(listed.group(2))]
    with segstore.open(ROOT / "compat_fixtures" / "rocketmq" / "basic" / "store") as store:
        line = json.loads(b"".join(bytes(block) for block in store.dump_json()).splitlines()[0])
    assert list(line) == keys
    with segstore.open(tmp_path / "s", format="rocketmq", mode="a") as store:
        store.append_batch([{"topic": "T", "body": b"b", "tags": "tAAx"}, {"topic": "T", "body": b"c"}])
    [path] = (tmp_path / "s" / "commitlog").iterdir()
    path.write_bytes(path.read_bytes().replace(b"tAAx", b"t\xff\xffx"))   # bytes that are not UTF-8
    with segstore.open(tmp_path / "s") as store:
        lines = [json.loads(t) for t in b"".join(bytes(block) for block in store.dump_json()).splitlines()]
    assert [list(line) for line in lines] == [[*keys, listed.group(3)], keys]


def _options() -> dict[str, set[str]]:
    """Each command's (and ``index`` subcommand's) long options, as its parser takes them."""
    found: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:   # argparse has no public way to walk its options
            if isinstance(action, argparse._SubParsersAction):
                for child, sub in action.choices.items():
                    walk(sub, f"{name} {child}".strip())
            else:
                found.setdefault(name, set()).update(o for o in action.option_strings if o.startswith("--"))

    walk(build_parser(), "")
    return found


#: Where each command's options are documented besides docs/cli.md.
_PAGES_OF = {"convert": ["conversion.md"], "index": ["index-layouts.md"]}

#: Flags docs/cli.md names that are the other tools' (kafka-dump-log's, kafka-topics', kafka-configs',
#: kafka-delete-records', kafka-get-offsets', kafka-console-consumer's), mapped to segstore's there.
_OTHER_TOOLS_FLAGS = {"--remote-log-metadata-decoder",
                      "--max-message-size", "--partitions", "--under-replicated-partitions",
                      "--unavailable-partitions", "--entity-type", "--offset-json-file", "--time",
                      "--from-beginning"}


@pytest.mark.parametrize("command", sorted(_options()))
def test_every_option_of_a_command_is_documented(command):
    """``segstore COMMAND --help``'s options are named in docs/cli.md (or the command's own page)."""
    pages = ["cli.md", *_PAGES_OF.get(command.split(" ")[0], [])]
    text = "".join((ROOT / "docs" / page).read_text() for page in pages)
    missing = [o for o in sorted(_options()[command] - {"--help"})
               if not re.search(re.escape(o) + r"(?![\w-])", text)]
    assert not missing, missing
    from segstore.spark import consumers

    table = _section("spark.md", "## Consumer groups as a table")
    listed = table[table.index("Options: "):table.index(" as the `segstore` source")]
    assert {name for name in re.findall(r"`(\w+)`", listed)} | {"path"} == set(consumers._NAMES)


@pytest.mark.parametrize("page", ["docs/cli.md", "README.md"])
def test_every_option_the_command_line_pages_name_is_one_segstore_takes(page):
    """A flag docs/cli.md or the README names is one of segstore's, or one of the tools' whose commands
    they map to segstore's (and the README's spark-submit --jars)."""
    taken = set().union(*_options().values())
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", (ROOT / page).read_text()))
    assert named - taken - _OTHER_TOOLS_FLAGS - {"--jars"} == set()
    assert not _OTHER_TOOLS_FLAGS & taken
    assert page != "docs/cli.md" or _OTHER_TOOLS_FLAGS <= named


def test_spark_md_lists_every_option_the_source_takes_and_no_other():
    """docs/spark.md's option tables name each reader option the source takes or refuses as a live
    cluster's (names case-insensitive, as Spark's), its "Writing" section each
    writer option, and its consumers section ``segstore_consumers``'s; ``path`` is ``load(PATH)``'s and
    ``topics`` is documented as ``subscribe``'s alias."""
    from segstore.spark import options

    text = (ROOT / "docs" / "spark.md").read_text()
    tables = {name.lower() for name in _first_column(_section("spark.md", "## Options"))} - {"kafka.*"}
    taken = options._READ_NAMES | options._CLUSTER_NAMES
    assert tables | {"path", "topics"} == taken | {"kafka.bootstrap.servers"}
    assert "(`topics` is the same)" in text
    writing = _section("spark.md", "## Writing").lower()
    missing = [name for name in sorted({name.lower() for name in options.WRITE_OPTIONS} - {"path"})
               if not re.search(rf"[`\"]{name}[`\"]", writing)]
    assert not missing, missing


def test_architecture_md_gives_messages_fields_in_their_order():
    """``segstore.records.Message``'s fields as the plugin contract lists them, in the dataclass's order
    (a plugin building one positionally relies on it): the page had ``topic, partition, offset,
    timestamp, key, value``, the class is ``topic, value, key, partition, ...``."""
    from dataclasses import fields

    from segstore.records import Message

    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text[text.index("class Message:"):text.index("class Record(")]
    listed = re.findall(r"(?:^|;)\s*(\w+):", "\n".join(line.split("#")[0] for line in block.splitlines()[1:]),
                        re.MULTILINE)
    assert listed == [f.name for f in fields(Message)]


def test_the_help_names_the_exit_codes_the_readme_names():
    """``segstore --help``'s epilog lists the exit codes the README and docs/cli.md give (130, Ctrl-C, was
    missing)."""
    epilog = build_parser().epilog or ""
    documented = {int(code) for code in re.findall(r"\*\*(\d+)\*\*", (ROOT / "README.md").read_text())}
    assert documented == {0, 1, 2, 130}
    assert {int(code) for code in re.findall(r"\b(\d+) [a-z]", epilog)} == documented, epilog
