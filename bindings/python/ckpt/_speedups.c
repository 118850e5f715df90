/* SPDX-License-Identifier: Apache-2.0 */
/* Hands numpy arrays to ckpt_vars_add without ctypes' per-call cost: for a checkpoint of 8192 small arrays,
 * building the collection through ctypes took as long as the restore itself (bench/bench_python.py).
 *
 * It calls the library through the function pointers ctypes already resolved (set_functions), so it links nothing
 * and always uses the library the package loaded. Only what it recognises is handled here: C-contiguous buffers of
 * numpy's numeric types in native byte order, under str names. Anything else stops the loop and is left to the
 * Python path, which keeps the collection's order. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

typedef int (*vars_add_fn)(void *vars, const char *name, uint32_t dtype, uint32_t ndim, const int64_t *shape,
                           const void *data, uint32_t flags);

static vars_add_fn vars_add = NULL;

enum { kBorrow = 1, kMaxDims = 64 };

/* ckpt's dtype code for a buffer's struct format and itemsize, or 0 when this module does not handle it. */
static uint32_t dtype_of(const char *format, Py_ssize_t itemsize) {
    if (format == NULL) return 0;
#if PY_LITTLE_ENDIAN
    if (*format == '@' || *format == '=' || *format == '<') ++format;
#else
    if (*format == '@' || *format == '=' || *format == '>' || *format == '!') ++format;
#endif
    if (format[0] == 'Z' && format[2] == '\0') {
        if (format[1] == 'f' && itemsize == 8) return 13;
        if (format[1] == 'd' && itemsize == 16) return 14;
        return 0;
    }
    if (format[0] == '\0' || format[1] != '\0') return 0;
    switch (format[0]) {
    case '?': return itemsize == 1 ? 1 : 0;
    case 'b': return itemsize == 1 ? 2 : 0;
    case 'B': return itemsize == 1 ? 6 : 0;
    case 'h': case 'i': case 'l': case 'q':
        return itemsize == 2 ? 3 : itemsize == 4 ? 4 : itemsize == 8 ? 5 : 0;
    case 'H': case 'I': case 'L': case 'Q':
        return itemsize == 2 ? 7 : itemsize == 4 ? 8 : itemsize == 8 ? 9 : 0;
    case 'e': return itemsize == 2 ? 10 : 0;
    case 'f': return itemsize == 4 ? 11 : 0;
    case 'd': return itemsize == 8 ? 12 : 0;
    default: return 0;
    }
}

static PyObject *set_functions(PyObject *self, PyObject *args) {
    unsigned long long add;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &add)) return NULL;
    vars_add = (vars_add_fn)(uintptr_t)add;
    Py_RETURN_NONE;
}

/* add_arrays(vars, items, start, writable) -> (next, code)
 * Adds items[start:] — a list of (name, value) — borrowing each value's buffer, until one it does not handle
 * (next is its index, code 0) or one ckpt refuses (next is its index, code the CKPT_E* code); (len, 0) when all
 * were added. With `writable`, only writable buffers are handled. The caller keeps the values alive. */
static PyObject *add_arrays(PyObject *self, PyObject *args) {
    unsigned long long handle;
    PyObject *items;
    Py_ssize_t start;
    int writable;
    (void)self;
    if (!PyArg_ParseTuple(args, "KO!np", &handle, &PyList_Type, &items, &start, &writable)) return NULL;
    if (vars_add == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ckpt._speedups: set_functions was not called");
        return NULL;
    }
    const Py_ssize_t n = PyList_GET_SIZE(items);
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    Py_ssize_t i = start;
    int code = 0;
    for (; i < n; ++i) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) break;
        PyObject *name = PyTuple_GET_ITEM(item, 0), *value = PyTuple_GET_ITEM(item, 1);
        if (!PyUnicode_CheckExact(name) || !PyObject_CheckBuffer(value)) break;
        Py_ssize_t utf8_size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(name, &utf8_size);
        if (utf8 == NULL || strlen(utf8) != (size_t)utf8_size) { /* a NUL in the name: the Python path says so */
            PyErr_Clear();
            break;
        }
        Py_buffer view;
        if (PyObject_GetBuffer(value, &view, flags) != 0) {
            PyErr_Clear();
            break;
        }
        const uint32_t dtype = dtype_of(view.format, view.itemsize);
        if (dtype == 0 || view.ndim > kMaxDims) {
            PyBuffer_Release(&view);
            break;
        }
        int64_t shape[kMaxDims];
        for (int k = 0; k < view.ndim; ++k) shape[k] = (int64_t)view.shape[k];
        code = vars_add((void *)(uintptr_t)handle, utf8, dtype, (uint32_t)view.ndim, shape,
                        view.len > 0 ? view.buf : NULL, kBorrow);
        PyBuffer_Release(&view);  /* the value itself stays alive with the caller, and so does its memory */
        if (code != 0) break;
    }
    return Py_BuildValue("(ni)", i, code);
}

static PyMethodDef methods[] = {
    {"set_functions", set_functions, METH_VARARGS, "Gives the module ckpt_vars_add's address."},
    {"add_arrays", add_arrays, METH_VARARGS, "Borrows numpy arrays into a ckpt_vars* in one call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ckpt._speedups", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
