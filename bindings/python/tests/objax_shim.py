# SPDX-License-Identifier: Apache-2.0
"""The few objax names an objax user's script needs, for a machine where objax cannot be installed: variables
with .value and .assign, TrainRef, VarCollection — and objax.io, which is ckpt's. Imported as `objax` by
test_objax.py."""
import types

import numpy as np

import ckpt


class BaseVar:
    def __init__(self, value):
        self._value = np.asarray(value)

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v):
        self.assign(v)

    def assign(self, v):
        v = np.asarray(v)
        assert v.shape == self._value.shape, "Assign can not change shape of variable."
        self._value = v


class TrainVar(BaseVar):
    pass


class StateVar(BaseVar):
    pass


class TrainRef:
    def __init__(self, ref):
        self.ref = ref

    @property
    def value(self):
        return self.ref.value


class VarCollection(dict):
    pass


io = types.SimpleNamespace(save_var_collection=ckpt.save_var_collection,
                           load_var_collection=ckpt.load_var_collection, Checkpoint=ckpt.Checkpoint)
