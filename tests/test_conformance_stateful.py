"""The stateful conformance test (append, read, reopen, crash vs an in-memory model) for every format."""

from segstore.testing import make_state_machine

TOPICS = {"TopicA": 2, "TopicB": 1}

TestRocketMQModel = make_state_machine(
    "rocketmq", {"mappedFileSizeCommitLog": 8192, "mappedFileSizeConsumeQueue": 200}, TOPICS).TestCase

TestKafkaModel = make_state_machine(
    "kafka", {"segment.bytes": 2048, "index.interval.bytes": 256, "segment.index.bytes": 96}, TOPICS).TestCase
