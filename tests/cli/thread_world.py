# SPDX-License-Identifier: Apache-2.0
"""Python code, as text, for the children that save sharded steps without MPI: ranks as threads of one process, and
a ckpt.Comm over them (World(n) and Comm(world, rank)). It needs `threading` and `ckpt` imported before it. Text,
so that the tests that run it never load numpy or ckpt themselves."""

THREAD_WORLD = """
class World:
    def __init__(self, n):
        self.n, self.slots, self.b = n, [None] * n, threading.Barrier(n)
    def exchange(self, r, v):
        self.b.wait(); self.slots[r] = v; self.b.wait(); out = list(self.slots); self.b.wait()
        return out

class Comm(ckpt.Comm):
    def __init__(self, world, r):
        self.world, self.r = world, r
        super().__init__()
    def get_rank(self): return self.r
    def get_size(self): return self.world.n
    def barrier(self): self.world.exchange(self.r, None)
    def all_reduce(self, v, op): return {"min": min, "max": max, "sum": sum}[op](self.world.exchange(self.r, v))
    def broadcast(self, d, root): return self.world.exchange(self.r, d)[root]
    def all_gather(self, d): return self.world.exchange(self.r, d)
"""
