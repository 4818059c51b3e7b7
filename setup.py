"""Build hook for the optional C accelerators: the Kafka record codec and the RocketMQ batch append.

Everything else is declared in pyproject.toml.  ``optional=True``: where no C
compiler is available the install still succeeds and segstore_kafka.batch /
segstore_rocketmq.fastappend use their pure-Python loops (same results, slower).
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
        ),
        Extension(
            "segstore_rocketmq._speedups",
            ["formats/segstore_rocketmq/_speedups.c"],
            libraries=["z"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers"],
            optional=True,
        ),
    ]
)
