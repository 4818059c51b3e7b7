"""A third format plugin for the tests (``linelog``), installed by ``tests/test_example_plugin.py``."""
