"""segstore: message-log storage files of Apache RocketMQ and Apache Kafka, read and written byte for byte.

``segstore.open(path, format=None, mode="r", **config)`` returns a store; see
:class:`segstore.store.Store` for what every store offers.
"""

from .api import open
from .errors import SegstoreError
from .records import Message, Record
from .store import AppendResult, DumpLine, Problem, QueryRequest, QueryResult, Store

__all__ = ["AppendResult", "DumpLine", "Message", "Problem", "QueryRequest", "QueryResult", "Record",
           "SegstoreError", "Store", "open"]
__version__ = "0.1.0"
