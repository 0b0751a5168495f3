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
    Py_ssize_t max_records; /* in: stop after this many plain records (0: no limit) */
    int utf8_stops;       /* in: a byte that is not UTF-8 stops the scan at its record, as a stop byte does */
    Py_ssize_t records;   /* plain records read */
    Py_ssize_t consumed;  /* where they end: the start of the record that stopped the scan */
    int stopped;          /* that record is not plain (otherwise the buffer ran out) */
    Py_ssize_t utf8_error; /* the offset of the first byte that is not UTF-8, or -1 */
    /* When the record that stopped the scan is plain but for its number of fields: where it ends
     * (after its line break) and its fields; -1 otherwise. */
    Py_ssize_t stop_end, stop_fields;
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
    const Py_ssize_t max_records = out->max_records;
    const int utf8_stops = out->utf8_stops;
    out->stop_end = out->stop_fields = -1;
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
        /* Sorting: the bad byte's record ends the scan (the scan would otherwise read on to the end of
         * the buffer, and the caller read again the records before the byte). */
        const uint64_t utf8_stop = utf8_stops && utf8_error >= base ? (uint64_t)1 << (utf8_error - base) : 0;

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

        uint64_t problems = bad_open | bad_close | blank | m.stop | utf8_stop;
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
                out->stop_end = base + b + 1;
                out->stop_fields = delims + POPCOUNT(delim_bits & upto) + 1;
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
            if (records == max_records)
                break;
        }
        if (max_records && records == max_records)
            break;
        if (stopped || problems) {
            stopped = 1;
            break;
        }
        delims += POPCOUNT(delim_bits);
        inside_before = (inside >> (n - 1)) & 1 ? ~(uint64_t)0 : 0;
        edge_before = (edges >> (n - 1)) & 1;
        line_start = (breaks >> (n - 1)) & 1;
    }
    if (!stopped && !(max_records && records == max_records) && final && record_start < len) {
        /* The last record runs to the end of the file without a line break. */
        if (inside_before || delims != columns - 1) {
            stopped = 1;
            if (!inside_before) {
                out->stop_end = len;
                out->stop_fields = delims + 1;
            }
        } else {
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

/* The separator, columns and stop bytes of a scan, checked; -1 with an exception set. */
static int
read_scan_arguments(int delimiter, Py_ssize_t columns, const char *stop_bytes, Py_ssize_t stop_count, Stops *stops)
{
    if (delimiter < 1 || delimiter > 127 || delimiter == '"' || delimiter == '\n' || delimiter == '\r' ||
        columns < 1) {
        PyErr_SetString(PyExc_ValueError, "an ASCII separator and at least one column are needed");
        return -1;
    }
    stops->count = stop_count;
    for (Py_ssize_t k = 0; k < stop_count && stop_count <= MAX_STOPS; k++) {
        const unsigned char c = (unsigned char)stop_bytes[k];
        if (c == '"' || c == '\n' || c == '\r' || c == delimiter)
            stop_count = MAX_STOPS + 1;
        else
            stops->bytes[k] = c;
    }
    if (stop_count > MAX_STOPS) {
        PyErr_SetString(PyExc_ValueError, "at most 16 stop bytes, none a quote, a line break or the separator");
        return -1;
    }
    return 0;
}

/* The column states ``types`` (a writable buffer, one byte per column) as a scan's typing; -1 with an exception set. */
static int
open_typing(PyObject *types, Py_ssize_t columns, Py_buffer *types_view, Typing *typing)
{
    if (PyObject_GetBuffer(types, types_view, PyBUF_WRITABLE) < 0)
        return -1;
    if (types_view->len < columns) {
        PyBuffer_Release(types_view);
        PyErr_SetString(PyExc_ValueError, "types needs one byte per column");
        return -1;
    }
    typing->changes = PyMem_Malloc((size_t)(3 * columns + SEPARATOR_SLACK) * sizeof(Py_ssize_t));
    if (typing->changes == NULL) {
        PyBuffer_Release(types_view);
        PyErr_NoMemory();
        return -1;
    }
    typing->states = types_view->buf;
    typing->columns = columns;
    typing->open_list = typing->changes + columns;
    typing->separators = typing->open_list + columns;
    find_open(typing);
    return 0;
}

static void
close_typing(Py_buffer *types_view, Typing *typing)
{
    PyMem_Free(typing->changes);
    PyBuffer_Release(types_view);
}

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
    PlainScan scan = {0};
    (void)module;
    if (!PyArg_ParseTuple(args, "y*Cnpy#|O:plain_records", &view, &delimiter, &columns, &final, &stop_bytes,
                          &stop_count, &types))
        return NULL;
    if (read_scan_arguments(delimiter, columns, stop_bytes, stop_count, &stops) < 0 ||
        (types != Py_None && open_typing(types, columns, &types_view, &typing) < 0)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    scan_plain(view.buf, view.len, (unsigned char)delimiter, columns, final, &stops, &typing, &scan);
    Py_END_ALLOW_THREADS
    if (typing.states)
        close_typing(&types_view, &typing);
    PyBuffer_Release(&view);
    return Py_BuildValue("nnOn", scan.records, scan.consumed, scan.stopped ? Py_True : Py_False, scan.utf8_error);
}


/*
 * sort_records is plain_records for the bad-row sorter (validation/bad_rows.py): it goes on after
 * the records a quarantine sets aside most often, a record that is plain but for its number of
 * fields, a stop byte (NUL) or a byte that is not UTF-8, instead of handing each back to Python.
 * Those are listed by where they start and end and by their fields (Python judges each by the
 * rules, from its bytes); any other record that is not plain ends the call, to be read exactly.
 * Only the plain records are typed: a bad row never types a column.
 */
PyDoc_STRVAR(sort_records_doc,
"sort_records(buffer, delimiter, columns, final, stops, types=None) -> (records, consumed, stopped, bad)\n\n"
"Read the records at the start of ``buffer`` as plain_records does, going on after each one that is\n"
"plain but for its number of fields, a stop byte or a byte that is not UTF-8; ``bad`` lists those as\n"
"(start, end, fields), in order. ``records`` counts the plain ones (typed in ``types``, when given);\n"
"``consumed`` is where the records read end; ``stopped`` is True when the record there is neither\n"
"(read it exactly), False when the buffer ran out.");

typedef struct {
    Py_ssize_t *items; /* start, end, fields; start, end, fields; ... */
    Py_ssize_t count, room;
} BadList;

static int
bad_add(BadList *list, Py_ssize_t start, Py_ssize_t end, Py_ssize_t fields)
{
    if (list->count == list->room) {
        const Py_ssize_t room = list->room ? 2 * list->room : 256;
        Py_ssize_t *items = PyMem_RawRealloc(list->items, (size_t)room * 3 * sizeof(Py_ssize_t));
        if (items == NULL)
            return -1;
        list->items = items;
        list->room = room;
    }
    list->items[3 * list->count] = start;
    list->items[3 * list->count + 1] = end;
    list->items[3 * list->count + 2] = fields;
    list->count++;
    return 0;
}

/* One record at ``at``, read with ``stops`` and ``typing`` (or none): the scan of it alone. */
static void
scan_one(const unsigned char *buf, Py_ssize_t len, Py_ssize_t at, unsigned char delimiter, Py_ssize_t columns,
         int final, const Stops *stops, Typing *typing, PlainScan *out)
{
    memset(out, 0, sizeof *out);
    out->max_records = 1;
    scan_plain(buf + at, len - at, delimiter, columns, final, stops, typing, out);
}

typedef struct {
    Py_ssize_t records, consumed;
    int stopped;
} SortScan;

/* The body of sort_records (no Python object is touched: it runs without the GIL). -1: out of memory. */
static int
sort_plain(const unsigned char *buf, Py_ssize_t len, unsigned char delimiter, Py_ssize_t columns, int final,
           const Stops *stops, Typing *typing, unsigned char *saved, BadList *bad, SortScan *out)
{
    const Stops no_stops = {0};
    Typing untyped = {0};
    Py_ssize_t pos = 0;
    out->records = 0;
    out->stopped = 0;
    PlainScan one = {0};
    while (pos < len) {
        PlainScan scan = {0};
        scan.utf8_stops = 1;
        if (typing->states)
            memcpy(saved, typing->states, (size_t)columns);
        scan_plain(buf + pos, len - pos, delimiter, columns, final, stops, typing, &scan);
        if (scan.utf8_error >= 0 && scan.utf8_error < scan.consumed) {
            /* A plain run with a byte that is not UTF-8: its records up to that byte's are good. */
            const Py_ssize_t bad_byte = pos + scan.utf8_error;
            if (typing->states) {
                memcpy(typing->states, saved, (size_t)columns);
                find_open(typing);
            }
            PlainScan head = {0};
            scan_plain(buf + pos, scan.utf8_error, delimiter, columns, 0, stops, typing, &head);
            out->records += head.records;
            pos += head.consumed;
            for (;;) { /* a CR just before the byte may have left a good record unread: one at a time */
                scan_one(buf, len, pos, delimiter, columns, final, stops, &untyped, &one);
                if (one.records != 1)
                    goto stop; /* not whole here: read again with more (or exactly) */
                if (pos + one.consumed > bad_byte)
                    break;
                scan_one(buf, len, pos, delimiter, columns, final, stops, typing, &one);
                out->records++;
                pos += one.consumed;
            }
            if (bad_add(bad, pos, pos + one.consumed, columns) < 0)
                return -1;
            pos += one.consumed;
            continue;
        }
        out->records += scan.records;
        const Py_ssize_t at = pos;
        pos += scan.consumed;
        if (!scan.stopped)
            break;
        if (scan.stop_end >= 0) { /* plain but for its number of fields */
            if (bad_add(bad, pos, at + scan.stop_end, scan.stop_fields) < 0)
                return -1;
            pos = at + scan.stop_end;
            continue;
        }
        /* Stopped inside the record: by a stop byte, if it reads as plain without them. */
        scan_one(buf, len, pos, delimiter, columns, final, &no_stops, &untyped, &one);
        if (one.records == 1) {
            if (bad_add(bad, pos, pos + one.consumed, columns) < 0)
                return -1;
            pos += one.consumed;
        } else if (one.stopped && one.stop_end >= 0) {
            if (bad_add(bad, pos, pos + one.stop_end, one.stop_fields) < 0)
                return -1;
            pos += one.stop_end;
        } else
            goto stop;
    }
    out->consumed = pos;
    return 0;
stop: /* the record at pos is not whole in the buffer (read on), or not plain (read it exactly) */
    out->consumed = pos;
    out->stopped = one.stopped;
    return 0;
}


static PyObject *
sort_records(PyObject *module, PyObject *args)
{
    Py_buffer view, types_view;
    PyObject *types = Py_None;
    Typing typing = {0};
    int delimiter, final, failed;
    Py_ssize_t columns, stop_count;
    const char *stop_bytes;
    Stops stops;
    SortScan scan = {0};
    BadList bad = {0};
    unsigned char *saved = NULL;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*Cnpy#|O:sort_records", &view, &delimiter, &columns, &final, &stop_bytes,
                          &stop_count, &types))
        return NULL;
    if (read_scan_arguments(delimiter, columns, stop_bytes, stop_count, &stops) < 0 ||
        (types != Py_None && open_typing(types, columns, &types_view, &typing) < 0)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (typing.states && (saved = PyMem_Malloc((size_t)columns)) == NULL) {
        close_typing(&types_view, &typing);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    failed = sort_plain(view.buf, view.len, (unsigned char)delimiter, columns, final, &stops, &typing, saved, &bad,
                        &scan);
    Py_END_ALLOW_THREADS
    PyMem_Free(saved);
    if (typing.states)
        close_typing(&types_view, &typing);
    PyBuffer_Release(&view);
    PyObject *list = failed ? PyErr_NoMemory() : PyList_New(bad.count);
    for (Py_ssize_t k = 0; list != NULL && k < bad.count; k++) {
        PyObject *item = Py_BuildValue("nnn", bad.items[3 * k], bad.items[3 * k + 1], bad.items[3 * k + 2]);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, k, item);
    }
    PyMem_RawFree(bad.items);
    if (list == NULL)
        return NULL;
    return Py_BuildValue("nnNN", scan.records, scan.consumed, PyBool_FromLong(scan.stopped), list);
}

/*
 * line_breaks counts the line breaks of a span as validation/ranges.py counts them: LF, CRLF and
 * a lone CR once each. The bad-row sorter numbers every row it sets aside by its line, so it
 * counts the lines of the whole file: bytes.count would take three passes (LF, CR, CRLF) where
 * a file has CR at all; this is one, 16 bytes at a time.
 */
PyDoc_STRVAR(line_breaks_doc,
"line_breaks(buffer, start=0, end=len(buffer)) -> int\n\n"
"The line breaks in ``buffer[start:end]``: LF, CRLF and a lone CR count once each\n"
"(a CR at ``end - 1`` counts once whatever follows it).");

static Py_ssize_t
count_breaks(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t count = 0, i = 0;
#if defined(__SSE2__) || defined(_M_X64)
    const __m128i lf = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
    /* A CR counts unless an LF follows it: the LF of a CRLF counts for both. */
    for (; i + 16 < n; i += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
        const __m128i next = _mm_loadu_si128((const __m128i *)(p + i + 1));
        const unsigned lfs = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, lf));
        const unsigned crs = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, cr));
        if (!(lfs | crs))
            continue;
        const unsigned cr_lf = crs & (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(next, lf));
        count += POPCOUNT(lfs) + POPCOUNT(crs & ~cr_lf);
    }
#endif
    for (; i < n; i++) {
        if (p[i] == '\n')
            count++;
        else if (p[i] == '\r' && !(i + 1 < n && p[i + 1] == '\n'))
            count++;
    }
    return count;
}

static PyObject *
line_breaks(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start = 0, end = PY_SSIZE_T_MAX, count;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*|nn:line_breaks", &view, &start, &end))
        return NULL;
    if (end > view.len)
        end = view.len;
    if (start < 0 || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "0 <= start <= end is needed");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    count = count_breaks((const unsigned char *)view.buf + start, end - start);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

static PyMethodDef speedups_methods[] = {
    {"plain_records", plain_records, METH_VARARGS, plain_records_doc},
    {"line_breaks", line_breaks, METH_VARARGS, line_breaks_doc},
    {"sort_records", sort_records, METH_VARARGS, sort_records_doc},
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
