"""What the entries of a Kafka log directory are named, and the listings built on the names.

``LocalLog``: a partition directory is ``TOPIC-N`` and holds ``%020d.log`` segments
(the base offset, zero-padded).  Kept apart from the partition and log-directory
code so that telling whether a directory is Kafka's (the plugin's ``detect``, run
for every store a command opens) loads nothing more.  Pure except for the listing.
"""

from __future__ import annotations

import os
import re

from segstore import files

PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
SEGMENT_LOG = re.compile(r"^(?P<base>\d{20})\.log$")


def segment_bases(path: str) -> list[int]:
    """Base offsets of the ``%020d.log`` files in a directory, sorted."""
    return sorted(int(m["base"]) for m in map(SEGMENT_LOG.match, files.list_dir(path)) if m)


def partition_dirs(path: str) -> list[str]:
    """Names of the partition directories under a log directory, sorted."""
    return [name for name in files.list_dir(path)
            if PARTITION_DIR.match(name) and files.is_dir(os.path.join(path, name))
            and segment_bases(os.path.join(path, name))]
