"""The conformance suite every format plugin must pass.

A plugin's test module subclasses :class:`StoreTests` and sets ``format`` and
``config`` (small files so that segments roll); every ``test_*`` method then runs
against that format.  :func:`make_state_machine` builds a Hypothesis
``RuleBasedStateMachine`` that appends, reads, reopens and crashes a store and
compares it with an in-memory model after every step.

The helpers write and read *only* through the public API (``segstore.open``,
``Store`` methods), so the suite tests a plugin as a user sees it.

The generated messages are those every format carries whole (the round trips the suite
promises): keys without spaces, header names and values UTF-8 text without 0x00-0x02, and
header values not empty, since a RocketMQ property cannot carry an empty name or value (the
broker's decoder, 4.9.7 ``MessageDecoder.string2messageProperties``, drops such a pair, and the
RocketMQ plugin refuses to append one).
"""

from __future__ import annotations

from .conformance import StoreTests, make_state_machine, sample_messages

__all__ = ["StoreTests", "make_state_machine", "sample_messages"]
