/*
 * airflow_tables.sources._transcode: single-byte text to UTF-8, the native kernel of
 * airflow_tables.sources.transcode (optional).
 *
 * Files exported from older systems come in Windows-1252, Latin-1 and the other
 * single-byte code pages. Python converts them with a charmap decode, then a UTF-8
 * encode (two passes and a str in between); this does it in one pass from a 256-entry
 * table, skipping runs of ASCII sixteen bytes at a time, much faster (measured in benchmarks/sources.py), so
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
#if !defined(_WIN32)
#include <setjmp.h>
#include <signal.h>
#define GUARD_MAPPED 1
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* A table entry: up to three bytes of UTF-8, then their count; 0x80 set on the count
 * when the byte is undefined in the code page (it is written as U+FFFD). */
#define ENTRY_SIZE 4
#define UNDEFINED 0x80

/* The length of the run of ASCII bytes (under 0x80) at the start of src[0:n]. Sixteen bytes at
 * a time where SSE2 is there (every x86-64), eight elsewhere: most of a CSV is ASCII, and this is
 * where the time goes. */
static Py_ssize_t
ascii_run(const unsigned char *src, Py_ssize_t n)
{
    Py_ssize_t i = 0;
#if defined(__SSE2__)
    while (i + 16 <= n) {
        int mask = _mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(src + i)));
        if (mask)
            return i + __builtin_ctz((unsigned int)mask);
        i += 16;
    }
#elif defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (i + 8 <= n) {
        uint64_t word;
        memcpy(&word, src + i, 8);
        word &= 0x8080808080808080ULL;
        if (word)
            return i + (__builtin_ctzll(word) >> 3);
        i += 8;
    }
#endif
    while (i < n && src[i] < 0x80)
        i++;
    return i;
}

/* Convert (dst set) or count (dst NULL) src[0:n] by the table; dst holds at least 3 * n bytes. */
static Py_ssize_t
convert(const unsigned char *src, Py_ssize_t n, const unsigned char *table, int ascii_same, unsigned char *dst,
        Py_ssize_t dst_size, Py_ssize_t *first_bad)
{
    Py_ssize_t i = 0, out = 0;
    *first_bad = -1;
    while (i < n) {
        if (ascii_same) {
            Py_ssize_t run = ascii_run(src + i, n - i);
            if (dst)
                memcpy(dst + out, src + i, (size_t)run);
            out += run;
            i += run;
            if (i == n)
                break;
        }
        const unsigned char *entry = table + ENTRY_SIZE * src[i];
        unsigned char length = entry[3];
        if (length & UNDEFINED) {
            if (*first_bad < 0)
                *first_bad = i;
            length &= (unsigned char)~UNDEFINED;
        }
        if (dst) {
            /* A fixed four-byte store is one instruction; the entry's spare bytes are overwritten next. */
            if (out + ENTRY_SIZE <= dst_size)
                memcpy(dst + out, entry, ENTRY_SIZE);
            else
                memcpy(dst + out, entry, length);
        }
        out += length;
        i++;
    }
    return out;
}

/* What the byte at src[(i)] (0x80 or over) adds to the count beyond `counted` bytes already
 * counted for it; an undefined one is noted. */
#define COUNT_HIGH_BYTE(i, counted)                                         \
    do {                                                                    \
        unsigned char length_ = table[ENTRY_SIZE * src[(i)] + 3];           \
        if ((length_ & UNDEFINED) && *first_bad < 0)                        \
            *first_bad = (i);                                               \
        extra += (Py_ssize_t)(length_ & (unsigned char)~UNDEFINED) - (counted); \
    } while (0)

#if defined(__SSE2__)
/* Lanes of v inside the range that `bias` and `limit` describe (see count_ascii_same) set to -1. */
static inline __m128i
in_range(__m128i v, __m128i bias, __m128i limit)
{
    return _mm_cmplt_epi8(_mm_sub_epi8(v, bias), limit);
}
#endif

/* Count only, where ASCII maps to itself: the UTF-8 length of src[0:n]. The counting pass of a
 * declared encoding reads the whole file before its upload can start (its length is the upload's
 * Content-Length), so it has to run at the memory's speed, and convert() restarts its ASCII scan
 * after every byte over 0x7F (one in two hundred of a Western European CSV): 0.095 s per 512 MiB
 * on one core against this loop's 0.071 s and a bare read's 0.051 s. Every byte over 0x7F counts
 * two, summed in SIMD lanes without a branch. The few whose UTF-8 is not two bytes long, or that
 * the code page leaves undefined (in Windows-1252 the bytes 0x80-0x9F: the euro sign, curly
 * quotes), lie in one range; a stretch of 4032 bytes with a byte in it is looked up byte by byte. */
static Py_ssize_t
count_ascii_same(const unsigned char *src, Py_ssize_t n, const unsigned char *table, Py_ssize_t *first_bad)
{
    Py_ssize_t i = 0, extra = 0;
    *first_bad = -1;
#if defined(__SSE2__)
    int low = 256, high = -1; /* the bytes over 0x7F whose entry is not a defined two-byte one */
    for (int b = 0x80; b < 256; b++) {
        if (table[ENTRY_SIZE * b + 3] != 2) {
            if (low > b)
                low = b;
            high = b;
        }
    }
    /* v in [low, high] <=> (v - low) as unsigned <= high - low <=> (v - low - 128) as signed < high - low - 127 */
    const __m128i bias = _mm_set1_epi8((char)(low + 128)), limit = _mm_set1_epi8((char)(high - low - 127));
    const __m128i zero = _mm_setzero_si128();
    while (i + 64 <= n) {
        /* Each lane counts at most four bytes a 64-byte step: 63 steps stay under 256. */
        Py_ssize_t start = i, steps = (n - i) / 64 > 63 ? 63 : (n - i) / 64;
        __m128i high_bytes = zero, odd = zero;
        for (; steps > 0; steps--, i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
            __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
            /* A byte over 0x7F is negative as a signed byte: its lane of the comparison is -1. */
            high_bytes = _mm_sub_epi8(high_bytes, _mm_cmplt_epi8(a, zero));
            high_bytes = _mm_sub_epi8(high_bytes, _mm_cmplt_epi8(b, zero));
            high_bytes = _mm_sub_epi8(high_bytes, _mm_cmplt_epi8(c, zero));
            high_bytes = _mm_sub_epi8(high_bytes, _mm_cmplt_epi8(d, zero));
            if (high >= low)
                odd = _mm_or_si128(odd, _mm_or_si128(_mm_or_si128(in_range(a, bias, limit), in_range(b, bias, limit)),
                                                     _mm_or_si128(in_range(c, bias, limit), in_range(d, bias, limit))));
        }
        uint64_t sums[2];
        _mm_storeu_si128((__m128i *)sums, _mm_sad_epu8(high_bytes, zero));
        extra += (Py_ssize_t)(sums[0] + sums[1]); /* one more byte than an ASCII one's, each */
        if (_mm_movemask_epi8(odd)) {
            for (Py_ssize_t j = start; j < i; j++)
                if (src[j] >= low && src[j] <= high)
                    COUNT_HIGH_BYTE(j, 2);
        }
    }
#elif defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, src + i, 8);
        for (word &= 0x8080808080808080ULL; word; word &= word - 1)
            COUNT_HIGH_BYTE(i + (__builtin_ctzll(word) >> 3), 1);
    }
#endif
    for (; i < n; i++)
        if (src[i] >= 0x80)
            COUNT_HIGH_BYTE(i, 1);
    return n + extra;
}

/* Why the table cannot be applied, or NULL. convert() trusts each entry's length to size its writes
 * (the target holds 3 bytes a source byte), so a length past 3 would write beyond it: the public
 * builder (sources/transcode.py) never makes one, but a hand-made table is refused, not trusted. */
static const char *
table_problem(const unsigned char *table, int ascii_same)
{
    for (int b = 0; b < 256; b++) {
        const unsigned char *entry = table + ENTRY_SIZE * b;
        unsigned char length = entry[3] & (unsigned char)~UNDEFINED;
        if (length < 1 || length > 3)
            return "every table entry's length (its fourth byte, without 0x80) must be 1 to 3";
        if (ascii_same && b < 0x80 && (entry[0] != b || entry[3] != 1))
            return "ascii_same needs the table to map every byte under 0x80 to itself";
    }
    return NULL;
}

PyDoc_STRVAR(single_byte_to_utf8_doc,
"single_byte_to_utf8(source, table, ascii_same, target) -> (written, first_bad)\n\n"
"Convert ``source`` (bytes of a single-byte code page) to UTF-8 by ``table`` (256 entries\n"
"of 4 bytes: the UTF-8 bytes, then their count, with 0x80 set for a byte the code page\n"
"does not define). ``ascii_same`` says bytes under 0x80 map to themselves (runs of them\n"
"are copied as they are). ``target`` is a writable buffer of at least 3 * len(source) bytes, or None\n"
"to only count. ``first_bad`` is the offset of the first undefined byte, or -1. A table\n"
"whose lengths are not 1 to 3, or not ASCII's own where ``ascii_same`` says so, is refused\n"
"(ValueError).");

#if GUARD_MAPPED
/*
 * A file mapped in memory (sources/mapped.py) that another process truncates while it is read
 * raises SIGBUS on the first page past its new end, which kills the task with no message. While
 * this kernel reads, a SIGBUS on its own thread jumps back out of it, and the call raises
 * OSError instead; any other SIGBUS goes to the handler that was there before (faulthandler's,
 * or the default, which ends the process as before).
 */
static _Thread_local sigjmp_buf *guard_jump = NULL;
static struct sigaction previous_bus;
static int guard_installed = 0;

static void
on_bus(int sig, siginfo_t *info, void *context)
{
    sigjmp_buf *jump = guard_jump;
    if (jump != NULL)
        siglongjmp(*jump, 1);
    if (previous_bus.sa_flags & SA_SIGINFO) {
        previous_bus.sa_sigaction(sig, info, context);
        return;
    }
    if (previous_bus.sa_handler == SIG_DFL || previous_bus.sa_handler == SIG_IGN) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    previous_bus.sa_handler(sig);
}

/* Installed once, with the GIL held (so by one thread). 0 on success. */
static int
install_guard(void)
{
    if (guard_installed)
        return 0;
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_bus;
    ours.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&ours.sa_mask);
    if (sigaction(SIGBUS, &ours, &previous_bus) != 0)
        return -1;
    guard_installed = 1;
    return 0;
}
#endif

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
    const char *problem = table_problem(table.buf, ascii_same);
    if (problem) {
        PyErr_SetString(PyExc_ValueError, problem);
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
    volatile int cut_short = 0;
#if GUARD_MAPPED
    sigjmp_buf jump;
    if (install_guard() != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        if (target.obj)
            PyBuffer_Release(&target);
        goto fail;
    }
#endif
    Py_BEGIN_ALLOW_THREADS
#if GUARD_MAPPED
    if (sigsetjmp(jump, 1) != 0) {
        cut_short = 1;
    } else {
        guard_jump = &jump;
#endif
        if (target.buf == NULL && ascii_same)
            written = count_ascii_same(source.buf, source.len, table.buf, &first_bad);
        else
            written = convert(source.buf, source.len, table.buf, ascii_same, target.buf, target.len, &first_bad);
#if GUARD_MAPPED
    }
    guard_jump = NULL;
#endif
    Py_END_ALLOW_THREADS
    if (target.obj)
        PyBuffer_Release(&target);
    PyBuffer_Release(&source);
    PyBuffer_Release(&table);
    if (cut_short) {
        PyErr_SetString(PyExc_OSError,
                        "the bytes could not be read (SIGBUS): the mapped file was cut short while it was read");
        return NULL;
    }
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
    "airflow_tables.sources._transcode",
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
