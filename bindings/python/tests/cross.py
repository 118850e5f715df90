# SPDX-License-Identifier: Apache-2.0
"""The Python side of the cross-language checkpoint (tests/cross/README.md), through the ckpt package."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import ckpt  # noqa: E402

W = np.array([[0.5, -1.0, 2.0], [3.25, -4.0, 0.001]], np.float32)
BF16 = np.array([0x3f80, 0xc000, 0x7f80, 0x0001], np.uint16)
F8 = np.array([0x38, 0xb8, 0x7e], np.uint8)
NOTE = "été ∂"
ORDER = ["w", "step", "bf16", "f8", "empty"]


def checkpoint():
    return {"w": W, "step": np.array(42, np.int64), "bf16": ckpt.typed(BF16, "bfloat16"),
            "f8": ckpt.typed(F8, "float8_e4m3fn"), "empty": np.zeros((0, 2), np.int32)}


def zeros():
    return {"w": np.zeros((2, 3), np.float32), "step": np.zeros((), np.int64),
            "bf16": ckpt.typed(np.zeros(4, np.uint16), "bfloat16"), "f8": ckpt.typed(np.zeros(3, np.uint8),
                                                                                        "float8_e4m3fn"),
            "empty": np.zeros((0, 2), np.int32)}


def differ(what):
    sys.stderr.write("cross.py: %s differs\n" % what)
    sys.exit(1)


def check(arrays, metadata, types):
    if list(arrays) != ORDER:
        differ("the names or their order (%s)" % list(arrays))
    expected = {"w": W, "step": np.array(42, np.int64), "bf16": BF16, "f8": F8, "empty": np.zeros((0, 2), np.int32)}
    for name, value in expected.items():
        got = arrays[name]
        got = got.bits if isinstance(got, ckpt.typed) else got
        if got.shape != value.shape or got.tobytes() != value.tobytes():
            differ(name)
    want = {"w": "float32", "step": "int64", "bf16": "bfloat16", "f8": "float8_e4m3fn", "empty": "int32"}
    if types != want:
        differ("the dtypes (%s)" % types)
    if metadata.get("note") != NOTE or "writer" not in metadata:
        differ("the metadata (%s)" % metadata)
    print("ok %s" % metadata["writer"])


def main(argv):
    if len(argv) == 4 and argv[1] == "write" and argv[3] in ("plain", "objax"):
        ckpt.save(argv[2], checkpoint(), metadata={"writer": "python", "note": NOTE}, layout=argv[3])
    elif len(argv) == 3 and argv[1] == "check":
        with ckpt.open(argv[2]) as f:
            types = {n: f.ckpt_dtype(n) for n in f}
        loaded = ckpt.load(argv[2])
        check(loaded, loaded.metadata, types)
    elif len(argv) == 4 and argv[1] in ("manager-save", "manager-resume"):
        idx = int(argv[3])
        with ckpt.Manager(argv[2], keep=3) as m:
            if argv[1] == "manager-save":
                m.save(checkpoint(), idx, metadata={"writer": "python", "note": NOTE, "step": argv[3]})
            else:
                target = zeros()
                restored, metadata = m.restore(target)
                if restored != idx:
                    differ("the index restored (%d)" % restored)
                if metadata.get("step") != argv[3]:
                    differ("metadata 'step'")
                types = {n: ckpt.dtypes.name(ckpt.dtypes.code_of(v)[0]) for n, v in target.items()}
                check(target, metadata, types)
    else:
        sys.stderr.write("usage: cross.py write PATH plain|objax | check PATH | manager-save LOGDIR IDX | "
                         "manager-resume LOGDIR IDX\n")
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except ckpt.CkptError as e:
        sys.stderr.write("cross.py: %s\n" % e)
        sys.exit(1)
