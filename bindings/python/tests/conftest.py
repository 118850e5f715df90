"""The tests run against the library CKPT_LIBRARY names (the CMake test sets it to the staged install) and the
package in this tree (or an installed one, when PYTHONPATH does not point here)."""
import os
import sys

sys.dont_write_bytecode = True
here = os.path.dirname(os.path.abspath(__file__))
if os.path.join(here, "..") not in sys.path and not os.environ.get("CKPT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.abspath(os.path.join(here, "..")))
