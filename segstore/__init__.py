"""segstore: message-log storage files of Apache RocketMQ and Apache Kafka, read and written byte for byte.

``segstore.open(path, format=None, mode="r", **config)`` returns a store; see
:class:`segstore.store.Store` for what every store offers.
"""

from .api import open  # noqa: A004
from .errors import SegstoreError
from .records import Message
from .store import AppendResult, Problem, QueryRequest, Store

__all__ = ["AppendResult", "Message", "Problem", "QueryRequest", "SegstoreError", "Store", "open"]
__version__ = "0.1.0"
