"""The index entry types every format's indexes are made of, in the core (one copy each).

=================  ===============================================  =======================
module             entries                                          native to
=================  ===============================================  =======================
:mod:`.dense`      dense queue entries, 20 bytes per offset         RocketMQ ``consumequeue``
:mod:`.sparse`     sparse offset entries, 8 bytes                   Kafka ``.index``
:mod:`.timeindex`  sparse time entries, 12 bytes                    Kafka ``.timeindex``
:mod:`.keyhash`    the key-hash file (header, slots, chained         RocketMQ ``index/``
                   20-byte entries)
:mod:`.javahash`   ``String.hashCode``, which the key hash and
                   the tags code are made of
=================  ===============================================  =======================

Each module writes its byte layout at its top as named dtypes/structs with
asserted sizes, and looks up through the one binary search
(:mod:`segstore.search`).  A format plugin declares which of them are its
broker's native files (:attr:`segstore.plugin.FormatPlugin.native_indexes`);
the generic layouts of :mod:`segstore.layouts` keep the others for any store
implementing :class:`segstore.logview.LogView`, in the same byte layouts.
Pure over :mod:`segstore.files`; thread-safety as each class says.
"""
