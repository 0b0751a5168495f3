/*
 * airflow_tables._transcode: single-byte text to UTF-8, the native kernel of
 * airflow_tables.sources.transcode (optional).
 *
 * Files exported from older systems come in Windows-1252, Latin-1 and the other
 * single-byte code pages. Python converts them with a charmap decode, then a UTF-8
 * encode (two passes and a str in between); this does it in one pass from a 256-entry
 * table, eight ASCII bytes at a time, five to six times faster (docs/sources.md), so
 * converting while uploading costs little next to the upload itself. The table is built in Python
 * from the codec itself (each byte decoded alone), so this decides nothing about any
 * encoding: it only applies the table. Where it could not be built, Python's codecs
 * do the same work, more slowly (tests/sources/test_encodings.py holds the two to the
 * same answers). The GIL is released while it runs.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A table entry: up to three bytes of UTF-8, then their count; 0x80 set on the count
 * when the byte is undefined in the code page (it is written as U+FFFD). */
#define ENTRY_SIZE 4
#define UNDEFINED 0x80

static Py_ssize_t
convert(const unsigned char *src, Py_ssize_t n, const unsigned char *table, int ascii_same, unsigned char *dst,
        Py_ssize_t *first_bad)
{
    Py_ssize_t i = 0, out = 0;
    *first_bad = -1;
    while (i < n) {
        if (ascii_same && i + 8 <= n) {
            uint64_t word;
            memcpy(&word, src + i, 8);
            if ((word & 0x8080808080808080ULL) == 0) {
                if (dst)
                    memcpy(dst + out, src + i, 8);
                out += 8;
                i += 8;
                continue;
            }
        }
        const unsigned char *entry = table + ENTRY_SIZE * src[i];
        unsigned char length = entry[3];
        if (length & UNDEFINED) {
            if (*first_bad < 0)
                *first_bad = i;
            length &= (unsigned char)~UNDEFINED;
        }
        if (dst)
            memcpy(dst + out, entry, length);
        out += length;
        i++;
    }
    return out;
}

PyDoc_STRVAR(single_byte_to_utf8_doc,
"single_byte_to_utf8(source, table, ascii_same, target) -> (written, first_bad)\n\n"
"Convert ``source`` (bytes of a single-byte code page) to UTF-8 by ``table`` (256 entries\n"
"of 4 bytes: the UTF-8 bytes, then their count, with 0x80 set for a byte the code page\n"
"does not define). ``ascii_same`` says bytes under 0x80 map to themselves (copied eight\n"
"at a time). ``target`` is a writable buffer of at least 3 * len(source) bytes, or None\n"
"to only count. ``first_bad`` is the offset of the first undefined byte, or -1.");

static PyObject *
single_byte_to_utf8(PyObject *module, PyObject *args)
{
    Py_buffer source, table, target = {0};
    PyObject *target_obj;
    int ascii_same;
    Py_ssize_t written, first_bad;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*y*pO:single_byte_to_utf8", &source, &table, &ascii_same, &target_obj))
        return NULL;
    if (table.len != 256 * ENTRY_SIZE) {
        PyErr_SetString(PyExc_ValueError, "the table must have 256 entries of 4 bytes");
        goto fail;
    }
    if (target_obj != Py_None) {
        if (PyObject_GetBuffer(target_obj, &target, PyBUF_WRITABLE) < 0)
            goto fail;
        if (target.len < 3 * source.len) {
            PyErr_SetString(PyExc_ValueError, "the target must hold 3 bytes per source byte");
            PyBuffer_Release(&target);
            goto fail;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    written = convert(source.buf, source.len, table.buf, ascii_same, target.buf, &first_bad);
    Py_END_ALLOW_THREADS
    if (target.obj)
        PyBuffer_Release(&target);
    PyBuffer_Release(&source);
    PyBuffer_Release(&table);
    return Py_BuildValue("nn", written, first_bad);
fail:
    PyBuffer_Release(&source);
    PyBuffer_Release(&table);
    return NULL;
}

static PyMethodDef transcode_methods[] = {
    {"single_byte_to_utf8", single_byte_to_utf8, METH_VARARGS, single_byte_to_utf8_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef transcode_module = {
    PyModuleDef_HEAD_INIT,
    "airflow_tables._transcode",
    "Native single-byte to UTF-8 conversion for airflow_tables.sources.transcode (optional).",
    -1,
    transcode_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__transcode(void)
{
    return PyModule_Create(&transcode_module);
}
