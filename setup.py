"""Build hook for the optional C accelerator of the Kafka record codec.

Everything else is declared in pyproject.toml.  ``optional=True``: where no C
compiler is available the install still succeeds and segstore_kafka.batch uses
its pure-Python loops (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "segstore_kafka._speedups",
            ["formats/segstore_kafka/_speedups.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers"],
            optional=True,
        )
    ]
)
