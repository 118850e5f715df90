# SPDX-License-Identifier: Apache-2.0
"""The package is pure Python; ckpt._speedups, a small C extension that hands many numpy arrays to libckpt in one
call, is built when a C compiler and Python's headers are there, and skipped (the package works without it) when
they are not."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("ckpt._speedups", ["ckpt/_speedups.c"], optional=True,
                             extra_compile_args=["-O2", "-Wall"])])
