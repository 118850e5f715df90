# SPDX-License-Identifier: Apache-2.0
"""The JSON documents of the ckpt program, checked key by key against docs/cli.md: every key always present (null
where it does not apply), with its documented type. Sizes and times are null for s3:// paths (the C API does not
tell them for objects) and never null for local ones."""


class Schema:
    def __init__(self, test):
        self.t = test

    def obj(self, value, spec, where):
        self.t.assertIsInstance(value, dict, where)
        self.t.assertEqual(set(value), set(spec), where)
        for key, check in spec.items():
            check(value[key], "%s.%s" % (where, key))


def is_int(t):
    return lambda v, w: t.assertTrue(isinstance(v, int) and not isinstance(v, bool), "%s: %r" % (w, v))


def is_str(t):
    return lambda v, w: t.assertIsInstance(v, str, w)


def is_bool(t):
    return lambda v, w: t.assertIsInstance(v, bool, w)


def one_of(t, *choices):
    return lambda v, w: t.assertIn(v, choices, w)


def nullable(check):
    return lambda v, w: None if v is None else check(v, w)


def list_of(t, check):
    def f(v, w):
        t.assertIsInstance(v, list, w)
        for i, item in enumerate(v):
            check(item, "%s[%d]" % (w, i))
    return f


def str_map(t):
    def f(v, w):
        t.assertIsInstance(v, dict, w)
        for k, x in v.items():
            t.assertIsInstance(k, str, w)
            t.assertIsInstance(x, str, w)
    return f


def number_or_special(t):
    return lambda v, w: t.assertTrue(isinstance(v, (int, float)) and not isinstance(v, bool) or
                                     v in ("nan", "inf", "-inf"), "%s: %r" % (w, v))


def iso_utc(t):
    return lambda v, w: t.assertRegex(v, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", w)


VERDICTS = ("ok", "corrupt", "unsupported", "unreadable", "not-npz")


def size_check(t, doc, local_check):
    """A size: what local_check checks; on S3 an opened file's size (ckpt_reader_file_size), null for a sharded step's
    objects and for what could not be opened."""
    path = doc.get("path", "") if isinstance(doc, dict) else ""
    if path.startswith("s3://"):
        return nullable(is_int(t)) if doc.get("sharded") or doc.get("layout") == "sharded" or \
            doc.get("arrays") is None else is_int(t)
    return local_check


def null_on_s3(t, path, local_check):
    """A size or time: what local_check checks for a local path, null for an s3:// URL."""
    if path.startswith("s3://"):
        return lambda v, w: t.assertIsNone(v, "%s (%s)" % (w, path))
    return local_check


def check_ls(t, doc):
    s = Schema(t)
    def entry(v, w):
        t.assertIsInstance(v, dict, w)
        p = v.get("path", "")
        s3 = p.startswith("s3://")
        source = lambda x, ww: t.assertRegex(x, r"^(metadata:.+)$" if s3 else r"^(mtime|metadata:.+)$", ww)
        # On S3 a checkpoint with no time in its metadata has none at all.
        saved = (nullable(is_str(t)), nullable(source)) if s3 else (is_str(t), source)
        s.obj(v, {
            "index": nullable(is_int(t)), "path": is_str(t), "bytes": size_check(t, v, is_int(t)),
            "mtime": null_on_s3(t, p, iso_utc(t)), "saved_at": saved[0], "saved_at_source": saved[1],
            "arrays": nullable(is_int(t)), "metadata": nullable(str_map(t)),
            "verdict": nullable(one_of(t, *VERDICTS)), "error": nullable(is_str(t)), "sharded": is_bool(t),
            "incomplete": is_bool(t), "problem": nullable(one_of(t, *VERDICTS[1:], "incomplete"))}, w)
    s.obj(doc, {"directory": is_str(t), "checkpoints": list_of(t, entry), "temporaries": list_of(t, is_str(t)),
                "manager": is_bool(t)}, "ls")


def check_error(t, doc, name):
    """The document of a failed run under --json."""
    t.assertEqual(set(doc), {"error"})
    t.assertEqual(set(doc["error"]), {"code", "name", "message"})
    t.assertEqual(doc["error"]["name"], name)
    t.assertIsInstance(doc["error"]["code"], int)
    t.assertLess(doc["error"]["code"], 0)
    t.assertIsInstance(doc["error"]["message"], str)


def check_show(t, doc):
    s = Schema(t)
    size = size_check(t, doc, is_int(t))
    if isinstance(doc, dict) and doc.get("layout") == "sharded":
        variable = lambda v, w: s.obj(v, {
            "name": is_str(t), "dtype": is_str(t), "itemsize": is_int(t), "shape": list_of(t, is_int(t)),
            "bytes": is_int(t), "pieces": is_int(t)}, w)
        s.obj(doc, {"path": is_str(t), "bytes": size, "layout": one_of(t, "sharded"), "step": is_int(t),
                    "world_size": is_int(t), "shards": list_of(t, is_str(t)), "arrays": list_of(t, variable),
                    "metadata": str_map(t)}, "show")
        return
    array = lambda v, w: s.obj(v, {
        "name": is_str(t), "member": is_str(t), "dtype": is_str(t), "itemsize": is_int(t),
        "shape": list_of(t, is_int(t)), "byte_order": one_of(t, "<", ">", "|"), "fortran_order": is_bool(t),
        "bytes": is_int(t), "stored_bytes": is_int(t), "compression": one_of(t, "stored", "deflated"),
        "crc32": nullable(is_int(t)),  # null: a safetensors file has no checksums
        "data_offset": nullable(is_int(t)), "alignment": nullable(is_int(t))}, w)
    s.obj(doc, {"path": is_str(t), "bytes": size, "format": one_of(t, "npz", "safetensors"),
                "layout": one_of(t, "plain", "objax"),
                "shared_bytes": nullable(is_int(t)), "arrays": list_of(t, array), "metadata": str_map(t)}, "show")


def check_verify(t, doc):
    s = Schema(t)
    file_entry = lambda v, w: s.obj(v, {
        "path": is_str(t), "verdict": one_of(t, *VERDICTS), "error": nullable(is_str(t)),
        "arrays": nullable(is_int(t)), "bytes": nullable(is_int(t))}, w)  # null: a step on S3, or unopened
    dir_entry = lambda v, w: s.obj(v, {"path": is_str(t), "checkpoints": nullable(is_int(t)),
                                       "error": nullable(is_str(t))}, w)
    summary = lambda v, w: s.obj(v, {k: is_int(t) for k in ("files", "ok", "corrupt", "unsupported", "unreadable", "not_npz")}, w)
    s.obj(doc, {"files": list_of(t, file_entry), "directories": list_of(t, dir_entry), "summary": summary}, "verify")


def check_diff(t, doc):
    s = Schema(t)
    side = nullable(lambda v, w: s.obj(v, {"dtype": is_str(t), "itemsize": is_int(t),
                                           "shape": list_of(t, is_int(t))}, w))
    array = lambda v, w: s.obj(v, {
        "name": is_str(t),
        "status": one_of(t, "only_in_a", "only_in_b", "dtype_changed", "shape_changed", "values_changed", "equal"),
        "a": side, "b": side, "elements": nullable(is_int(t)), "differing": nullable(is_int(t)),
        "nan_mismatches": nullable(is_int(t)), "max_abs_diff": nullable(number_or_special(t)),
        "max_rel_diff": nullable(number_or_special(t)), "max_abs_diff_index": nullable(list_of(t, is_int(t)))}, w)
    meta = lambda v, w: s.obj(v, {"key": is_str(t), "status": one_of(t, "only_in_a", "only_in_b", "changed"),
                                  "a": nullable(is_str(t)), "b": nullable(is_str(t))}, w)
    s.obj(doc, {"a": is_str(t), "b": is_str(t), "equal": is_bool(t), "arrays": list_of(t, array),
                "metadata": list_of(t, meta), "metadata_ignored": list_of(t, is_str(t))}, "diff")
