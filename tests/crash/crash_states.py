# SPDX-License-Identifier: Apache-2.0
"""Every state a power cut may leave, built from a log of the file-system calls a process made (syscall_log.c).

The model (tests/crash/README.md) is what POSIX and XFS/btrfs promise, harsher than ext4's ordered journal:

- data written to a file since its last fsync/fdatasync may be absent, torn at 4 KiB pages, or present (a
  truncation or a clone is data as a write is); sync_file_range makes nothing durable;
- a change of a directory's entries — a file created, a mkdir, a rename, an unlink, an rmdir, a link — not yet
  followed by an fsync of that directory may be undone, each independently of the others; a rename is one change
  (its old and new names go together) and is made durable by an fsync of either directory;
- a directory whose own entry is not durable is not there, and neither is anything in it.

crash_states(log, before, logged_root) yields, for every point of the log (before the first call, after each one),
the distinct states a cut there may leave, each as {relative path: bytes, or None for a directory ("dir/")} with
its digest, plus the marks the program had made by then.
"""
import collections
import hashlib
import itertools
import os
from urllib.parse import unquote

PAGE = 4096

Record = collections.namedtuple("Record", "op args data")


def read_log(path):
    """The log's records, in order."""
    records = []
    with open(path, "rb") as f:
        blob = f.read()
    at = 0
    while at < len(blob):
        end = blob.index(b"\n", at)
        fields = blob[at:end].decode().split(" ")
        at = end + 1
        data = None
        if fields[0] == "write":
            n = int(fields[3])
            data = blob[at:at + n]
            if len(data) != n:
                raise ValueError("%s: the log ends inside a write" % path)
            at += n
        records.append(Record(fields[0], fields[1:], data))
    return records


class Inode:
    __slots__ = ("is_dir", "current", "durable", "entries", "durable_entries")

    def __init__(self, is_dir, content=b""):
        self.is_dir = is_dir
        self.current = bytearray(content)  # files
        self.durable = bytes(content)
        self.entries = {}  # directories: name -> inode
        self.durable_entries = {}


# One pending change of directory entries: `steps` [(directory inode, name, inode, or None to remove it)], `dirs`
# the ids of the directories it touches (an fsync of any of them makes it durable).
Change = collections.namedtuple("Change", "dirs steps")


def _put(entries, name, inode):
    """A step of a Change, on a directory's entries."""
    if inode is None:
        entries.pop(name, None)
    else:
        entries[name] = inode


class Model:
    def __init__(self, before, logged_root):
        self.root_path = os.path.abspath(logged_root)
        self.root = Inode(True)
        self.fds = {}
        self.pending = []  # Changes not yet durable, in order
        self._load(self.root, before)

    def _load(self, node, path):
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if os.path.isdir(full) and not os.path.islink(full):
                child = Inode(True)
                self._load(child, full)
            else:
                with open(full, "rb") as f:
                    child = Inode(False, f.read())
            node.entries[name] = child
            node.durable_entries[name] = child

    def _lookup(self, path):
        """(parent inode, name) of an absolute path under the root; (None, "") for the root."""
        rel = os.path.relpath(unquote(path), self.root_path)
        if rel == ".":
            return None, ""
        parts = rel.split("/")
        node = self.root
        for part in parts[:-1]:
            node = node.entries[part]
        return node, parts[-1]

    def _change(self, steps):
        for parent, name, inode in steps:
            _put(parent.entries, name, inode)
        self.pending.append(Change(frozenset(id(p) for p, _, _ in steps), steps))

    def apply(self, r):
        a = r.args
        if r.op == "open":
            fd, created, trunc, is_dir = int(a[0]), a[1] == "1", a[2] == "1", a[3] == "1"
            parent, name = self._lookup(a[4])
            if created:
                inode = Inode(is_dir)
                self._change([(parent, name, inode)])
            else:
                inode = parent.entries[name] if parent is not None else self.root
                if trunc:
                    del inode.current[:]
            self.fds[fd] = inode
        elif r.op == "write":
            inode, offset = self.fds[int(a[0])], int(a[1])
            if len(inode.current) < offset:
                inode.current.extend(bytes(offset - len(inode.current)))
            inode.current[offset:offset + len(r.data)] = r.data
        elif r.op == "truncate":
            inode, length = self.fds[int(a[0])], int(a[1])
            if length < len(inode.current):
                del inode.current[length:]
            else:
                inode.current.extend(bytes(length - len(inode.current)))
        elif r.op == "sync":
            inode = self.fds[int(a[0])]
            if inode.is_dir:
                for change in [c for c in self.pending if id(inode) in c.dirs]:
                    self._make_durable(change)
            else:
                inode.durable = bytes(inode.current)
        elif r.op == "close":
            self.fds.pop(int(a[0]), None)
        elif r.op == "rename":
            p1, n1 = self._lookup(a[0])
            p2, n2 = self._lookup(a[1])
            inode = p1.entries[n1]
            self._change([(p1, n1, None), (p2, n2, inode)])
        elif r.op == "link":
            p1, n1 = self._lookup(a[0])
            p2, n2 = self._lookup(a[1])
            self._change([(p2, n2, p1.entries[n1])])
        elif r.op in ("unlink", "rmdir"):
            parent, name = self._lookup(a[0])
            self._change([(parent, name, None)])
        elif r.op == "mkdir":
            parent, name = self._lookup(a[0])
            self._change([(parent, name, Inode(True))])
        elif r.op in ("srange", "mark", "fail", "cloned"):
            pass
        else:
            raise ValueError("unknown record %r" % (r.op,))

    def _make_durable(self, change):
        for parent, name, inode in change.steps:
            _put(parent.durable_entries, name, inode)
        self.pending.remove(change)

    def states(self):
        """The distinct states a cut now may leave: ({relative path: bytes}, its state_digest)."""
        seen = set()
        contents = {}  # (id(inode), data) -> what the file holds: the same in every subset
        for keep in _subsets(len(self.pending)):
            overlay = {}  # id(dir) -> entries with the kept changes applied
            for i in keep:
                for parent, name, inode in self.pending[i].steps:
                    _put(overlay.setdefault(id(parent), dict(parent.durable_entries)), name, inode)
            for data in ("lost", "torn", "kept"):
                files = {}
                self._collect(self.root, "", overlay, data, files, contents)
                key = state_digest(files)
                if key not in seen:
                    seen.add(key)
                    yield files, key

    def _collect(self, node, prefix, overlay, data, out, contents):
        entries = overlay.get(id(node), node.durable_entries)
        for name, inode in entries.items():
            path = prefix + name
            if inode.is_dir:
                out[path + "/"] = None
                self._collect(inode, path + "/", overlay, data, out, contents)
            else:
                if (id(inode), data) not in contents:
                    contents[id(inode), data] = _content(inode, data)
                out[path] = contents[id(inode), data]


def state_digest(files):
    """One digest of a state: its paths and their contents."""
    return hashlib.sha256(repr(sorted((k, hashlib.sha256(v).digest() if v is not None else None)
                                      for k, v in files.items())).encode()).digest()


def _content(inode, data):
    if data == "kept" or bytes(inode.current) == inode.durable:
        return bytes(inode.current)
    if data == "lost":
        return inode.durable
    # torn: the new size, every other page new, the others old (zeros past the old end)
    new, old = bytes(inode.current), inode.durable
    pages = []
    for i in range(0, len(new), PAGE):
        if (i // PAGE) % 2 == 0:
            pages.append(new[i:i + PAGE])
        else:
            piece = old[i:i + PAGE]
            pages.append(piece + bytes(min(PAGE, len(new) - i) - len(piece)))
    return b"".join(pages)


def _subsets(n):
    """Which pending changes persist: every subset of up to 4; beyond, every prefix, every one alone and every
    one left out (n^2-ish, which holds the orders that matter: a later change durable before an earlier one)."""
    if n <= 4:
        return [c for k in range(n + 1) for c in itertools.combinations(range(n), k)]
    out = {tuple(range(k)) for k in range(n + 1)}
    out |= {(i,) for i in range(n)}
    out |= {tuple(j for j in range(n) if j != i) for i in range(n)}
    return sorted(out)


def crash_states(log, before, logged_root):
    """(index, marks made so far, state, its digest) for every point of the log and every state a cut there may
    leave. before
    is a copy of the directory as it was before the logged run, logged_root the directory the run worked in."""
    records = read_log(log)
    model = Model(before, logged_root)
    marks = []
    for index in range(len(records) + 1):
        if index > 0:
            r = records[index - 1]
            model.apply(r)
            if r.op == "mark":
                marks.append(unquote(r.args[0]))
                continue  # the state is the one before it
        for state, digest in model.states():
            yield index, list(marks), state, digest
