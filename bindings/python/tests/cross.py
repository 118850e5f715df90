# SPDX-License-Identifier: Apache-2.0
"""The Python side of the cross-language checkpoint (tests/cross/README.md), through the ckpt package."""
import os
import struct
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


def nested():
    """Training state as a PyTorch program holds it, with every kind of node and key the record has."""
    return {
        "model": {"fc.weight": W, "fc.bias": np.array([0.25, -0.5], np.float32)},
        "optimizer": {"state": {0: {"step": np.array(3.0, np.float32), "exp_avg": W * 2},
                                1: {"step": np.array(3.0, np.float32), "exp_avg": np.zeros(2, np.float32)}},
                      "param_groups": [{"lr": 0.001, "betas": (0.9, 0.999), "eps": 1e-08, "weight_decay": 0,
                                        "amsgrad": False, "foreach": None, "params": [0, 1]}]},
        "epoch": 3, "big": 2 ** 80, -5: "n\u00e9gatif ∂\n", "a/b~c": {"nan": float("nan"), "neg0": -0.0,
                                                                  "ninf": float("-inf"), "": "", "t": ()},
        "empty": {}, "list": [], "bf16": ckpt.typed(BF16, "bfloat16"),
    }


def print_tree(path, value, reached):
    """One line per node (tests/cross/README.md): path, how it is reached, kind, value."""
    def hexed(text):
        return text.encode().hex() or "."
    if isinstance(value, dict):
        kind, shown = "dict", str(len(value))
    elif isinstance(value, (list, tuple)):
        kind, shown = type(value).__name__, str(len(value))
    elif value is None:
        kind, shown = "None", "-"
    elif isinstance(value, bool):
        kind, shown = "bool", "true" if value else "false"
    elif isinstance(value, int):
        kind, shown = "int", str(value)
    elif isinstance(value, float):
        kind, shown = "float", struct.pack(">d", value).hex()
    elif isinstance(value, str):
        kind, shown = "str", hexed(value)
    else:
        kind, shown = "array", "%s [%s]" % (hexed(path), ",".join(str(d) for d in value.shape))
    print("%s %s %s %s" % (hexed(path), reached, kind, shown))
    prefix = path + "/" if path else ""
    if isinstance(value, dict):
        for key, child in value.items():
            print_tree(prefix + ckpt.tree.escape(str(key)), child, "int" if isinstance(key, int) else "str")
    elif isinstance(value, (list, tuple)):
        for i, child in enumerate(value):
            print_tree(prefix + str(i), child, "item")


def main(argv):
    if len(argv) == 4 and argv[1] == "write" and argv[3] in ("plain", "objax"):
        ckpt.save(argv[2], checkpoint(), metadata={"writer": "python", "note": NOTE}, layout=argv[3])
    elif len(argv) == 3 and argv[1] == "write-nested":
        ckpt.save(argv[2], nested(), metadata={"writer": "python"})
    elif len(argv) == 3 and argv[1] == "tree":
        print_tree("", dict(ckpt.load(argv[2])), "root")
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
                         "manager-resume LOGDIR IDX | write-nested PATH | tree PATH\n")
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except ckpt.CkptError as e:
        sys.stderr.write("cross.py: %s\n" % e)
        sys.exit(1)
