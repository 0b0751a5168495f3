/*
 * airflow_tables.validation._speedups: the native kernel of airflow_tables.validation.kernels (optional).
 *
 * One function, plain_records, answers in one pass what the pure-Python kernel needs
 * several passes of bytes operations for (bytes.translate, split, decode): how many
 * plain records a block starts with, and where its first byte that is not UTF-8 is.
 * The pure-Python kernel stays in use wherever this module could not be built;
 * tests/validation/test_kernels.py holds the two to the same answers.
 *
 * It decides nothing the rules in validation/rules.py do not: it only recognises *plain*
 * records (the header's number of fields, every field unquoted or quoted from its
 * first byte to a closing quote right before a separator or a line break, none of the
 * bytes the rules stop on, no blank line) and stops at the first record that is anything
 * else, which Python then reads exactly and reports. The bytes to stop on come from the
 * rules (rules.STOP_BYTES, a NUL byte today): a new byte-level rule needs no change here. The GIL is released while it runs, so the
 * emulator's reader does not stall the server's other threads.
 *
 * Asked to (``types``), the same pass also types each column long or string by the rule of
 * validation/types.py, for the plain records it reads (see "Column types" below).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/*
 * plain_records reads 64 bytes at a time as bit masks, one bit per byte (the technique
 * of simdjson and simdcsv): where the quotes, separators, line breaks, stop bytes and
 * bytes over 0x7F are; which bytes are inside quotes (a prefix XOR of the quote mask); which quotes
 * open or close a field where csv would not (a quote in the middle of an unquoted
 * field is data to csv, not a quote; text after a closing quote is glued on); where
 * the blank lines are. Then it walks the record breaks of the window, counting the
 * separators outside quotes in each record.
 */

typedef struct {
    uint64_t quote, delim, lf, cr, stop, high;
} Masks;

/* The bytes the rules stop a plain run on (rules.STOP_BYTES), never a quote or a line break. */
#define MAX_STOPS 16
typedef struct {
    Py_ssize_t count;
    unsigned char bytes[MAX_STOPS];
} Stops;

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>

static inline uint64_t
eq_mask(const __m128i v[4], unsigned char c)
{
    const __m128i want = _mm_set1_epi8((char)c);
    uint64_t m = 0;
    for (int k = 0; k < 4; k++)
        m |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v[k], want)) << (16 * k);
    return m;
}

static inline void
window_masks(const unsigned char *p, unsigned char delimiter, const Stops *stops, Masks *m)
{
    __m128i v[4];
    for (int k = 0; k < 4; k++)
        v[k] = _mm_loadu_si128((const __m128i *)(p + 16 * k));
    m->quote = eq_mask(v, '"');
    m->delim = eq_mask(v, delimiter);
    m->lf = eq_mask(v, '\n');
    m->cr = eq_mask(v, '\r');
    m->stop = 0;
    for (Py_ssize_t k = 0; k < stops->count; k++)
        m->stop |= eq_mask(v, stops->bytes[k]);
    m->high = 0;
    for (int k = 0; k < 4; k++)
        m->high |= (uint64_t)(uint16_t)_mm_movemask_epi8(v[k]) << (16 * k);
}
#else
static inline void
window_masks(const unsigned char *p, unsigned char delimiter, const Stops *stops, Masks *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < 64; i++) {
        const uint64_t bit = (uint64_t)1 << i;
        for (Py_ssize_t k = 0; k < stops->count; k++)
            if (p[i] == stops->bytes[k])
                m->stop |= bit;
        switch (p[i]) {
        case '"': m->quote |= bit; break;
        case '\n': m->lf |= bit; break;
        case '\r': m->cr |= bit; break;
        default:
            if (p[i] == delimiter) m->delim |= bit;
            if (p[i] >= 0x80) m->high |= bit;
        }
    }
}
#endif

#if defined(__GNUC__) || defined(__clang__)
#define POPCOUNT(x) __builtin_popcountll(x)
#define CTZ(x) __builtin_ctzll(x)
#else
static inline int POPCOUNT(uint64_t x) { int n = 0; while (x) { x &= x - 1; n++; } return n; }
static inline int CTZ(uint64_t x) { int n = 0; while (!(x & 1)) { x >>= 1; n++; } return n; }
#endif

/* Bit i set when an odd number of quotes stand at or before i: the bytes inside quotes. */
static inline uint64_t
prefix_xor(uint64_t x)
{
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

/* Bits 0..i. */
static inline uint64_t
through(int i)
{
    return i == 63 ? ~(uint64_t)0 : ((uint64_t)1 << (i + 1)) - 1;
}

static inline int
is_field_edge(unsigned char c, unsigned char delimiter)
{
    return c == delimiter || c == '\n' || c == '\r' || c == '"';
}

/* The second byte of a multi-byte sequence, per the Unicode standard's table 3-7. */
static inline int
valid_second(unsigned char lead, unsigned char b)
{
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF; /* no overlong three-byte forms */
    case 0xED: return b >= 0x80 && b <= 0x9F; /* no surrogates */
    case 0xF0: return b >= 0x90 && b <= 0xBF; /* no overlong four-byte forms */
    case 0xF4: return b >= 0x80 && b <= 0x8F; /* nothing above U+10FFFF */
    default: return b >= 0x80 && b <= 0xBF;
    }
}

/*
 * The length of the UTF-8 sequence at buf[i] (a byte of 0x80 or more), 0 when it is
 * not UTF-8 (where bytes.decode would report its error), -1 when the buffer ends
 * inside it.
 */
static inline Py_ssize_t
utf8_sequence(const unsigned char *buf, Py_ssize_t len, Py_ssize_t i)
{
    const unsigned char lead = buf[i];
    Py_ssize_t need;
    if (lead >= 0xC2 && lead <= 0xDF)
        need = 1;
    else if (lead >= 0xE0 && lead <= 0xEF)
        need = 2;
    else if (lead >= 0xF0 && lead <= 0xF4)
        need = 3;
    else
        return 0; /* a continuation byte on its own, C0, C1 or F5-FF */
    for (Py_ssize_t k = 1; k <= need; k++) {
        if (i + k >= len)
            return -1;
        if (k == 1 ? !valid_second(lead, buf[i + 1]) : (buf[i + k] & 0xC0) != 0x80)
            return 0;
    }
    return need + 1;
}

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define ALWAYS_INLINE inline
#endif

/*
 * Column types (validation/types.py states the rule; this is the same rule in C, and
 * tests/validation/test_types.py holds the two to the same answers). A column's state is
 * one byte: 0 no value yet, 1 every value so far a long and one seen, 2 not a long
 * column (final: never looked at again). A value's kind uses the same numbers (0 blank,
 * 1 a long, 2 anything else), so a column's new state is the larger of the two.
 */
enum { UNSEEN = 0, SEEN_LONG = 1, NOT_LONG = 2 };

static inline int
is_blank_byte(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The kind of the value of the field buf[start:end] of a plain record (quoted from its first byte to its last, or not). */
static inline int
value_kind(const unsigned char *p, const unsigned char *e)
{
    if (p < e && *p == '"') {
        if (e - p < 2 || e[-1] != '"')
            return NOT_LONG; /* not plain: the record is handed back and this is never applied */
        p++; /* a plain record's quoted field ends with its closing quote */
        e--;
    }
    while (p < e && is_blank_byte(*p))
        p++;
    while (e > p && is_blank_byte(e[-1]))
        e--;
    if (p == e)
        return UNSEEN;
    int negative = 0;
    if (*p == '+' || *p == '-') {
        negative = *p == '-';
        if (++p == e)
            return NOT_LONG;
    }
    while (p < e && *p == '0')
        p++;
    if (e - p > 19)
        return NOT_LONG; /* a digit string this long is past 64 bits; anything else is not a long either */
    uint64_t value = 0;
    for (; p < e; p++) {
        const unsigned d = (unsigned)*p - '0';
        if (d > 9)
            return NOT_LONG;
        value = value * 10 + d; /* at most 19 digits: no overflow of 64 unsigned bits */
    }
    return value <= (uint64_t)INT64_MAX + (uint64_t)negative ? SEEN_LONG : NOT_LONG;
}

/*
 * The typing of one scan: the column states, the columns still open (not yet NOT_LONG),
 * and the changes a record's fields make, applied only once the record is known to be
 * plain (a record handed back to the exact read is typed there). The separators of the
 * records being read are written down as the windows are read (``flatten``: a fixed
 * number of stores per eight separators, no branch per separator), so a record's open
 * fields are found by index and the fields of columns already NOT_LONG are never looked at.
 */
/* Room past a record's separators: a window's 64, the 8 an unrolled flatten may write past them, and
 * enough for a few thousand windows of short records before the list is moved back to its start. */
#define SEPARATOR_SLACK (72 + 16 * 1024)

typedef struct {
    unsigned char *states;  /* one per column; NULL: not typing */
    Py_ssize_t columns;
    Py_ssize_t open;        /* how many columns are not yet NOT_LONG: typing stops at 0 */
    Py_ssize_t *open_list;  /* which, in order */
    Py_ssize_t *changes;    /* column * 4 + new state, for the record being read (one per column at most) */
    Py_ssize_t changed;
    Py_ssize_t *separators; /* offsets of the separators of the records being read: columns + SEPARATOR_SLACK */
    Py_ssize_t len;         /* the buffer's length: how far a word may be read */
} Typing;

static void
find_open(Typing *t)
{
    t->open = 0;
    for (Py_ssize_t c = 0; c < t->columns; c++)
        if (t->states[c] != NOT_LONG)
            t->open_list[t->open++] = c;
}

/* Write the offsets of the set bits of ``bits`` (a window at ``base``) to ``out``; return how many. */
static ALWAYS_INLINE Py_ssize_t
flatten(Py_ssize_t *out, uint64_t bits, Py_ssize_t base)
{
    const Py_ssize_t count = POPCOUNT(bits);
    const uint64_t top = (uint64_t)1 << 63; /* keeps CTZ defined once bits run out: those entries are past count */
    while (bits) {
        for (int k = 0; k < 8; k++) {
            out[k] = base + CTZ(bits | top);
            bits &= bits - 1;
        }
        out += 8;
    }
    return count;
}

/*
 * value_kind for buf[start:end], with a fast path for the usual value of a long column: 1 to
 * 8 bytes, all ASCII digits (then it fits: checked as one 64-bit word, SWAR, without a loop).
 */
static ALWAYS_INLINE int
field_kind(const unsigned char *buf, Py_ssize_t len, Py_ssize_t start, Py_ssize_t end)
{
    const Py_ssize_t n = end - start;
    if (n >= 1 && n <= 8 && start + 8 <= len) {
        uint64_t word;
        memcpy(&word, buf + start, 8);
        const uint64_t keep = n == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * n)) - 1;
        word = (word & keep) | (0x3030303030303030ULL & ~keep); /* the bytes past the field read as '0' */
        /* A byte below '0' borrows into its high bit; one above '9' carries into it. */
        if ((((word - 0x3030303030303030ULL) | (word + 0x4646464646464646ULL)) & 0x8080808080808080ULL) == 0)
            return SEEN_LONG;
    }
    return value_kind(buf + start, buf + end);
}

/*
 * The record from ``start`` to ``end`` (its line break; or the end of the buffer, ``at_end``),
 * whose separators are ``separators[0 .. columns - 1)``, is plain: type its open fields and
 * apply what they change.
 */
static ALWAYS_INLINE void
type_record(Typing *t, const unsigned char *buf, const Py_ssize_t *separators, Py_ssize_t start, Py_ssize_t end,
            int at_end)
{
    const Py_ssize_t last = t->columns - 1;
    for (Py_ssize_t k = 0; k < t->open; k++) {
        const Py_ssize_t c = t->open_list[k];
        const Py_ssize_t from = c ? separators[c - 1] + 1 : start;
        Py_ssize_t to = c == last ? end : separators[c];
        if (c == last && !at_end && to > from && buf[to] == '\n' && buf[to - 1] == '\r')
            to--; /* the CR of a CRLF */
        const int kind = field_kind(buf, t->len, from, to);
        if (kind > t->states[c])
            t->changes[t->changed++] = c * 4 + kind;
    }
    if (t->changed) {
        for (Py_ssize_t k = 0; k < t->changed; k++) {
            const Py_ssize_t c = t->changes[k] / 4;
            const unsigned char kind = (unsigned char)(t->changes[k] % 4);
            if (kind > t->states[c])
                t->states[c] = kind;
        }
        t->changed = 0;
        find_open(t);
    }
}

typedef struct {
    Py_ssize_t records;   /* plain records read */
    Py_ssize_t consumed;  /* where they end: the start of the record that stopped the scan */
    int stopped;          /* that record is not plain (otherwise the buffer ran out) */
    Py_ssize_t utf8_error; /* the offset of the first byte that is not UTF-8, or -1 */
} PlainScan;

static ALWAYS_INLINE void
scan_plain_body(const unsigned char *buf, Py_ssize_t len, unsigned char delimiter, Py_ssize_t columns, int final,
                const Stops *stops, Typing *typing, PlainScan *out)
{
    Py_ssize_t records = 0, record_start = 0, delims = 0;
    Py_ssize_t utf8_checked = 0, utf8_error = -1; /* bytes before utf8_checked are UTF-8 */
    uint64_t inside_before = 0;  /* all ones when the window starts inside quotes */
    uint64_t edge_before = 1;    /* the byte before the window ends a field (the buffer starts a record) */
    uint64_t line_start = 1;     /* the window's first byte starts a line */
    int stopped = 0;
    Py_ssize_t first = 0, separators = 0; /* typing: the records' separators being read, typing->separators[first:] */
    typing->len = len;

    if (!final && len > 0 && buf[len - 1] == '\r')
        len--; /* half of a CRLF, perhaps: leave it for the next buffer */
    for (Py_ssize_t base = 0; base < len && !stopped; base += 64) {
        const Py_ssize_t n = len - base < 64 ? len - base : 64;
        const uint64_t valid = n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
        unsigned char pad[64];
        const unsigned char *p = buf + base;
        if (n < 64) {
            memset(pad, 0, sizeof pad);
            memcpy(pad, p, (size_t)n);
            p = pad;
        }
        Masks m;
        window_masks(p, delimiter, stops, &m);
        m.stop &= valid; /* the padding is NUL bytes */
        m.high &= valid;

        /* The bytes of 0x80 and up must form UTF-8 sequences (which never hold an ASCII byte). */
        for (uint64_t leads = utf8_error < 0 ? m.high : 0; leads; leads &= leads - 1) {
            const Py_ssize_t at = base + CTZ(leads);
            if (at < utf8_checked)
                continue; /* a continuation byte of a sequence already checked */
            const Py_ssize_t size = utf8_sequence(buf, len, at);
            if (size > 0) {
                utf8_checked = at + size;
                continue;
            }
            if (size == 0 || final)
                utf8_error = at;
            break; /* or the buffer ends inside the sequence: it comes back with the rest */
        }

        /* What follows the window: the next byte, or the end (which closes anything). */
        const int more = base + n < len;
        const unsigned char next = more ? buf[base + n] : 0;
        const uint64_t last = (uint64_t)1 << (n - 1);

        const uint64_t inside = prefix_xor(m.quote) ^ inside_before;
        const uint64_t outside = ~inside & valid;
        const uint64_t edges = m.delim | m.lf | m.cr | m.quote;
        const uint64_t edge_prev = (edges << 1) | edge_before;
        const uint64_t edge_next = (edges >> 1) | ((!more || is_field_edge(next, delimiter)) ? last : 0);
        const uint64_t bad_open = m.quote & inside & ~edge_prev;
        const uint64_t bad_close = m.quote & ~inside & ~edge_next;

        const uint64_t lf = m.lf & outside, cr = m.cr & outside;
        const uint64_t lf_next = (m.lf >> 1) | ((more && next == '\n') ? last : 0);
        const uint64_t breaks = lf | (cr & ~lf_next);
        const uint64_t starts = (breaks << 1) | line_start;
        const uint64_t blank = starts & (lf | cr);

        uint64_t problems = bad_open | bad_close | blank | m.stop;
        uint64_t pending = breaks, delim_bits = m.delim & outside;
        if (typing->open && separators - first < columns) { /* else the record is ragged: it stops at its break */
            if (separators + 72 > columns + SEPARATOR_SLACK) { /* move the open record's separators back */
                memmove(typing->separators, typing->separators + first, (size_t)(separators - first) * sizeof(Py_ssize_t));
                separators -= first;
                first = 0;
            }
            separators += flatten(typing->separators + separators, delim_bits, base);
        }
        while (pending) {
            const int b = CTZ(pending);
            if (problems && CTZ(problems) <= b) {
                stopped = 1;
                break;
            }
            const uint64_t upto = through(b);
            if (delims + POPCOUNT(delim_bits & upto) != columns - 1) {
                stopped = 1;
                break;
            }
            if (typing->open) {
                type_record(typing, buf, typing->separators + first, record_start, base + b, 0);
                first += columns - 1;
            }
            delim_bits &= ~upto;
            problems &= ~upto;
            pending &= pending - 1;
            delims = 0;
            records++;
            record_start = base + b + 1;
        }
        if (stopped || problems) {
            stopped = 1;
            break;
        }
        delims += POPCOUNT(delim_bits);
        inside_before = (inside >> (n - 1)) & 1 ? ~(uint64_t)0 : 0;
        edge_before = (edges >> (n - 1)) & 1;
        line_start = (breaks >> (n - 1)) & 1;
    }
    if (!stopped && final && record_start < len) {
        /* The last record runs to the end of the file without a line break. */
        if (inside_before || delims != columns - 1)
            stopped = 1;
        else {
            if (typing->open)
                type_record(typing, buf, typing->separators + first, record_start, len, 1);
            records++;
            record_start = len;
        }
    }
    out->records = records;
    out->consumed = record_start;
    out->stopped = stopped;
    out->utf8_error = utf8_error;
}

typedef void (*ScanPlain)(const unsigned char *, Py_ssize_t, unsigned char, Py_ssize_t, int, const Stops *, Typing *,
                          PlainScan *);

static void
scan_plain_generic(const unsigned char *buf, Py_ssize_t len, unsigned char delimiter, Py_ssize_t columns, int final,
                   const Stops *stops, Typing *typing, PlainScan *out)
{
    scan_plain_body(buf, len, delimiter, columns, final, stops, typing, out);
}

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
/*
 * The same scan compiled for the bit instructions every x86-64 made since 2013 has (POPCNT,
 * and BMI1's TZCNT and BLSR: counting separators and clearing the lowest set bit in one
 * instruction each), chosen at import when the processor has them; the build itself
 * assumes nothing beyond the compiler's default target.
 */
__attribute__((target("popcnt,bmi"))) static void
scan_plain_bits(const unsigned char *buf, Py_ssize_t len, unsigned char delimiter, Py_ssize_t columns, int final,
                const Stops *stops, Typing *typing, PlainScan *out)
{
    scan_plain_body(buf, len, delimiter, columns, final, stops, typing, out);
}

static ScanPlain
choose_scan_plain(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi"))
        return scan_plain_bits;
    return scan_plain_generic;
}
#else
static ScanPlain
choose_scan_plain(void)
{
    return scan_plain_generic;
}
#endif

static ScanPlain scan_plain = scan_plain_generic; /* set at import: choose_scan_plain() */

PyDoc_STRVAR(plain_records_doc,
"plain_records(buffer, delimiter, columns, final, stops, types=None) -> (records, consumed, stopped, utf8_error)\n\n"
"Count the plain records of ``columns`` fields at the start of ``buffer`` (which must\n"
"start on a record boundary). ``consumed`` is where the plain records end; ``stopped``\n"
"is True when the record there is not plain (read it exactly), False when the buffer\n"
"ran out (the rest is an incomplete record, or nothing). ``final`` says the buffer\n"
"ends the file, so its last record needs no line break. ``utf8_error`` is the offset\n"
"of the first byte that is not UTF-8 (where bytes.decode would report it), or -1.\n"
"``stops`` holds the bytes no plain record has (the rules' stop table, at most 16).\n"
"``types``, when given, is a writable buffer of one state per column (validation/types.py:\n"
"0 no value yet, 1 all longs so far, 2 not a long column), raised in place by the values\n"
"of the plain records read.");

static PyObject *
plain_records(PyObject *module, PyObject *args)
{
    Py_buffer view, types_view;
    PyObject *types = Py_None;
    Typing typing = {0};
    int delimiter, final;
    Py_ssize_t columns, stop_count;
    const char *stop_bytes;
    Stops stops;
    PlainScan scan;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*Cnpy#|O:plain_records", &view, &delimiter, &columns, &final, &stop_bytes,
                          &stop_count, &types))
        return NULL;
    if (delimiter < 1 || delimiter > 127 || delimiter == '"' || delimiter == '\n' || delimiter == '\r' ||
        columns < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "an ASCII separator and at least one column are needed");
        return NULL;
    }
    stops.count = stop_count;
    for (Py_ssize_t k = 0; k < stop_count && stop_count <= MAX_STOPS; k++) {
        const unsigned char c = (unsigned char)stop_bytes[k];
        if (c == '"' || c == '\n' || c == '\r' || c == delimiter)
            stop_count = MAX_STOPS + 1;
        else
            stops.bytes[k] = c;
    }
    if (stop_count > MAX_STOPS) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "at most 16 stop bytes, none a quote, a line break or the separator");
        return NULL;
    }
    if (types != Py_None) {
        if (PyObject_GetBuffer(types, &types_view, PyBUF_WRITABLE) < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
        if (types_view.len < columns) {
            PyBuffer_Release(&types_view);
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_ValueError, "types needs one byte per column");
            return NULL;
        }
        typing.states = types_view.buf;
        typing.columns = columns;
        typing.changes = PyMem_Malloc((size_t)(3 * columns + SEPARATOR_SLACK) * sizeof(Py_ssize_t));
        if (typing.changes == NULL) {
            PyBuffer_Release(&types_view);
            PyBuffer_Release(&view);
            return PyErr_NoMemory();
        }
        typing.open_list = typing.changes + columns;
        typing.separators = typing.open_list + columns;
        find_open(&typing);
    }
    Py_BEGIN_ALLOW_THREADS
    scan_plain(view.buf, view.len, (unsigned char)delimiter, columns, final, &stops, &typing, &scan);
    Py_END_ALLOW_THREADS
    if (types != Py_None) {
        PyMem_Free(typing.changes);
        PyBuffer_Release(&types_view);
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nnOn", scan.records, scan.consumed, scan.stopped ? Py_True : Py_False, scan.utf8_error);
}

static PyMethodDef speedups_methods[] = {
    {"plain_records", plain_records, METH_VARARGS, plain_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "airflow_tables.validation._speedups",
    "The native kernel of airflow_tables.validation.kernels (optional).",
    -1,
    speedups_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    scan_plain = choose_scan_plain();
    return PyModule_Create(&speedups_module);
}
