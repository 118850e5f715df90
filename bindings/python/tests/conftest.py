# SPDX-License-Identifier: Apache-2.0
"""The tests run against the library CKPT_LIBRARY names (the CMake test sets it to the staged install) and the
package in this source tree, or, with CKPT_TEST_INSTALLED, the one PYTHONPATH names (the build tree's
<build>/python, or one pip installed)."""
import os
import sys

sys.dont_write_bytecode = True
here = os.path.dirname(os.path.abspath(__file__))
if os.path.join(here, "..") not in sys.path and not os.environ.get("CKPT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.abspath(os.path.join(here, "..")))
