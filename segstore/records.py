"""The common record model every format maps its records to.

A RocketMQ message and a Kafka record differ in almost every field; what a user
of either wants first is the same: where it is (topic, partition, offset), when
(timestamp), and what (key, value, headers).  :class:`Message` is that common
view.  Formats keep their own richer record classes and convert with
``Store.to_common``; appends accept a :class:`Message` (or a mapping with its
field names) in every format.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from .errors import InvalidMessageError

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

Header = tuple[str, "bytes | None"]


@dataclass(slots=True)
class Message:
    """One record in the common model.

    ``partition`` is the RocketMQ queue id or the Kafka partition; ``offset`` is the
    absolute logical offset within it (RocketMQ queue offset, Kafka offset); -1
    when not yet assigned.  ``timestamp`` is in milliseconds since the epoch.
    """

    topic: str
    value: bytes | None
    key: bytes | None = None
    partition: int = 0
    offset: int = -1
    timestamp: int = -1
    headers: list[Header] = field(default_factory=list)
    timestamp_type: str = CREATE_TIME

    @classmethod
    def coerce(cls, obj: Message | dict) -> Message:
        """Return ``obj`` as a :class:`Message`; strings become UTF-8 bytes.

        :raises InvalidMessageError: a field name :class:`Message` does not have, or a required one missing.
        """
        if isinstance(obj, Message):
            return obj
        data = dict(obj)
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        missing = [name for name in ("topic", "value") if name not in data]
        if unknown or missing:
            found = f"unknown field(s) {unknown}" if unknown else f"no {missing}"
            raise InvalidMessageError(f"expected the message fields {known} (topic and value required), "
                                      f"found {found}")
        for name in ("key", "value"):
            if isinstance(data.get(name), str):
                data[name] = data[name].encode("utf-8")
        data["headers"] = [
            (k, v.encode("utf-8") if isinstance(v, str) else v)
            for k, v in (data.get("headers") or [])
        ]
        return cls(**data)
