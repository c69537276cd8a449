/* tracekit.read._scan: the scanner's inner loop in C (optional; tracekit/read/envelopes.py falls back to
 * the same decision made by a regex when this module is not built).
 *
 * scan(buf, pos, limit, rank_mode, rank_digits, types, names) -> (p, newlines)
 *
 * Walks the newlines of buf[pos:limit] with memchr and returns the first one whose next line
 * might interest the reader, with the number of newlines it passed (those in buf[pos:p]); p is
 * -1 when there is none (newlines then counts those in buf[pos:limit]). Only buf[:limit] is
 * looked at, as `pattern.search(buf, pos, limit)` sees it.
 *
 * A newline is passed when the line after it is
 *   - a payload line (it starts with a tab), or
 *   - an ordinary envelope that nobody wants, exactly as envelopes._interesting_line_re skips
 *     it: a glog prefix, then
 *       {"TYPE": META[, "rank": RANK][, "frame_id": N, "frame_compile_id": N, "attempt": N]
 *        [, "KEY": SCALAR]...[, "has_payload": "MD5"]}
 *     with META an object (objects one level inside it, no braces in its strings), a flat list
 *     or a scalar, printable ASCII only, followed by payload lines exactly when it has
 *     has_payload; TYPE not one of `types`, and not an artifact whose name is one of `names`.
 * Every other newline is returned: the caller matches its regex there (the same decision for
 * the lines this code passes, and the only one for the rest), so this module may only ever pass
 * fewer lines than the regex, never more.
 *
 * rank_mode: 0, the file's rank is unknown (an envelope with "rank" is returned); 1, only
 * `rank_digits` (bytes), the file's own rank, is passed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef struct {
    const unsigned char *b;
    Py_ssize_t n; /* visible end (limit) */
    int rank_mode;
    const char *rank;
    Py_ssize_t rank_len;
    PyObject *types; /* tuple of bytes */
    PyObject *names; /* tuple of bytes */
} Ctx;

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_WORD(c) (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || (c) == '_')
/* [ -z|~]: printable ASCII but the braces */
#define IS_OBJ(c) (((c) >= 0x20 && (c) <= 0x7A) || (c) == 0x7C || (c) == 0x7E)
/* [ -Z\\^-~]: printable ASCII but the brackets */
#define IS_LIST(c) (((c) >= 0x20 && (c) <= 0x5A) || (c) == 0x5C || ((c) >= 0x5E && (c) <= 0x7E))
/* [ !#-\[\]-~]: printable ASCII but the quote and the backslash */
#define IS_STR(c) ((c) == 0x20 || (c) == 0x21 || ((c) >= 0x23 && (c) <= 0x5B) || ((c) >= 0x5D && (c) <= 0x7E))
#define IS_HEX(c) (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'f'))

/* The first newline in b[i:limit] that ends a line not followed by a payload line (its next byte
 * is not a tab, or is past the limit), or -1; `*count` grows by the newlines passed before it.
 * 16 bytes at a time where SSE2 is (every x86-64): a payload block is passed without a branch
 * per line. */
static Py_ssize_t next_stop(const unsigned char *b, Py_ssize_t i, Py_ssize_t limit, Py_ssize_t *count)
{
#if defined(__SSE2__)
    const __m128i nl = _mm_set1_epi8('\n'), tab = _mm_set1_epi8('\t');
    while (i + 17 <= limit) { /* the next byte of every newline in the block is before limit */
        __m128i v = _mm_loadu_si128((const __m128i *)(b + i));
        __m128i w = _mm_loadu_si128((const __m128i *)(b + i + 1));
        unsigned int nls = (unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
        unsigned int stops = nls & ~(unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(w, tab));
        if (stops == 0) {
            *count += __builtin_popcount(nls);
            i += 16;
            continue;
        }
        {
            int j = __builtin_ctz(stops);
            *count += __builtin_popcount(nls & ((1u << j) - 1u));
            return i + j;
        }
    }
#endif
    while (i < limit) {
        const unsigned char *q = memchr(b + i, '\n', (size_t)(limit - i));
        if (q == NULL)
            return -1;
        i = q - b;
        if (i + 1 >= limit || b[i + 1] != '\t')
            return i;
        (*count)++;
        i++;
    }
    return -1;
}

/* The literal `s` at i: the index after it, or -1. */
static inline Py_ssize_t lit(const Ctx *c, Py_ssize_t i, const char *s, Py_ssize_t len)
{
    if (i < 0 || c->n - i < len || memcmp(c->b + i, s, (size_t)len) != 0)
        return -1;
    return i + len;
}
#define LIT(c, i, s) lit((c), (i), (s), (Py_ssize_t)(sizeof(s) - 1))

/* Exactly k digits at i. */
static inline Py_ssize_t digits_k(const Ctx *c, Py_ssize_t i, int k)
{
    if (i < 0 || c->n - i < k)
        return -1;
    for (int j = 0; j < k; j++)
        if (!IS_DIGIT(c->b[i + j]))
            return -1;
    return i + k;
}

/* \d+ (possessive or not: what follows is never a digit). */
static inline Py_ssize_t digits(const Ctx *c, Py_ssize_t i)
{
    if (i < 0 || i >= c->n || !IS_DIGIT(c->b[i]))
        return -1;
    while (i < c->n && IS_DIGIT(c->b[i]))
        i++;
    return i;
}

/* The glog prefix: [VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^:\n]+:\d+\] */
static Py_ssize_t prefix(const Ctx *c, Py_ssize_t i)
{
    const unsigned char *b = c->b;
    if (i >= c->n)
        return -1;
    switch (b[i]) {
    case 'V': case 'I': case 'W': case 'E': case 'C': break;
    default: return -1;
    }
    i = digits_k(c, i + 1, 4);
    i = LIT(c, i, " ");
    i = digits_k(c, i, 2);
    i = LIT(c, i, ":");
    i = digits_k(c, i, 2);
    i = LIT(c, i, ":");
    i = digits_k(c, i, 2);
    i = LIT(c, i, ".");
    i = digits_k(c, i, 6);
    i = LIT(c, i, " ");
    i = digits(c, i);
    i = LIT(c, i, " ");
    if (i < 0 || i >= c->n || b[i] == ':' || b[i] == '\n')
        return -1;
    while (i < c->n && b[i] != ':' && b[i] != '\n')
        i++;
    i = LIT(c, i, ":");
    i = digits(c, i);
    return LIT(c, i, "] ");
}

/* Does a tuple of bytes hold b[i:i+len]? */
static int in_tuple(PyObject *tup, const unsigned char *s, Py_ssize_t len)
{
    Py_ssize_t k, m = PyTuple_GET_SIZE(tup);
    for (k = 0; k < m; k++) {
        PyObject *it = PyTuple_GET_ITEM(tup, k);
        if (PyBytes_GET_SIZE(it) == len && memcmp(PyBytes_AS_STRING(it), s, (size_t)len) == 0)
            return 1;
    }
    return 0;
}

/* (?!(?:T1|T2|...)") at i: is the word at i, closed by a quote, one of `tup`? */
static int word_in(const Ctx *c, Py_ssize_t i, PyObject *tup)
{
    Py_ssize_t j = i;
    while (j < c->n && IS_WORD(c->b[j]))
        j++;
    if (j >= c->n || c->b[j] != '"')
        return 0;
    return in_tuple(tup, c->b + i, j - i);
}

/* A JSON string of printable ASCII, no escapes: "[ !#-\[\]-~]*" */
static Py_ssize_t jstr(const Ctx *c, Py_ssize_t i)
{
    i = LIT(c, i, "\"");
    if (i < 0)
        return -1;
    while (i < c->n && IS_STR(c->b[i]))
        i++;
    return LIT(c, i, "\"");
}

/* (?:"..."|-?\d+(?:\.\d+)?|true|false|null) */
static Py_ssize_t scalar(const Ctx *c, Py_ssize_t i)
{
    if (i < 0 || i >= c->n)
        return -1;
    switch (c->b[i]) {
    case '"':
        return jstr(c, i);
    case 't':
        return LIT(c, i, "true");
    case 'f':
        return LIT(c, i, "false");
    case 'n':
        return LIT(c, i, "null");
    default:
        break;
    }
    if (c->b[i] == '-')
        i++;
    i = digits(c, i);
    if (i < 0)
        return -1;
    if (i + 1 < c->n && c->b[i] == '.' && IS_DIGIT(c->b[i + 1]))
        i = digits(c, i + 1);
    return i;
}

/* \{[ -z|~]*+(?:\{[ -z|~]*+\}[ -z|~]*+)*+\} */
static Py_ssize_t object(const Ctx *c, Py_ssize_t i)
{
    const unsigned char *b = c->b;
    i = LIT(c, i, "{");
    if (i < 0)
        return -1;
    while (i < c->n && IS_OBJ(b[i]))
        i++;
    while (i < c->n && b[i] == '{') {
        Py_ssize_t j = i + 1;
        while (j < c->n && IS_OBJ(b[j]))
            j++;
        if (j >= c->n || b[j] != '}')
            break; /* this repetition fails: the closing brace below does too */
        i = j + 1;
        while (i < c->n && IS_OBJ(b[i]))
            i++;
    }
    return LIT(c, i, "}");
}

/* \[[ -Z\\^-~]*\] */
static Py_ssize_t flat_list(const Ctx *c, Py_ssize_t i)
{
    i = LIT(c, i, "[");
    if (i < 0)
        return -1;
    while (i < c->n && IS_LIST(c->b[i]))
        i++;
    return LIT(c, i, "]");
}

static Py_ssize_t meta(const Ctx *c, Py_ssize_t i)
{
    if (i < 0 || i >= c->n)
        return -1;
    if (c->b[i] == '{')
        return object(c, i);
    if (c->b[i] == '[')
        return flat_list(c, i);
    return scalar(c, i);
}

/* The optional rank and torch's keys, as the regex's possessive groups take them. */
static Py_ssize_t rank_and_torch_keys(const Ctx *c, Py_ssize_t i)
{
    Py_ssize_t j;
    if (i < 0)
        return -1;
    if (c->rank_mode == 1) {
        j = lit(c, LIT(c, i, ", \"rank\": "), c->rank, c->rank_len);
        if (j >= 0)
            i = j;
    }
    j = digits(c, LIT(c, i, ", \"frame_id\": "));
    j = digits(c, LIT(c, j, ", \"frame_compile_id\": "));
    j = digits(c, LIT(c, j, ", \"attempt\": "));
    return j >= 0 ? j : i; /* all three, or none */
}

/* , "has_payload": "[0-9a-f]{32}"\}\n\t */
static int payload_end(const Ctx *c, Py_ssize_t i)
{
    i = LIT(c, i, ", \"has_payload\": \"");
    if (i < 0 || c->n - i < 32)
        return 0;
    for (int k = 0; k < 32; k++)
        if (!IS_HEX(c->b[i + k]))
            return 0;
    return LIT(c, i + 32, "\"}\n\t") >= 0;
}

/* {"TYPE": {}, then the rank, torch's keys and a payload: most envelopes (chromium events). */
static int common(const Ctx *c, Py_ssize_t i)
{
    Py_ssize_t j;
    i = LIT(c, i, "{\"");
    if (i < 0 || LIT(c, i, "artifact\"") >= 0 || word_in(c, i, c->types))
        return 0;
    j = i;
    while (j < c->n && IS_WORD(c->b[j]))
        j++;
    if (j == i)
        return 0;
    j = LIT(c, j, "\": {}");
    j = rank_and_torch_keys(c, j);
    return j >= 0 && payload_end(c, j);
}

/* (?!artifact": \{"name": "(?:NAMES)") at i */
static int wanted_artifact(const Ctx *c, Py_ssize_t i)
{
    Py_ssize_t j = LIT(c, i, "artifact\": {\"name\": \"");
    Py_ssize_t k;
    if (j < 0)
        return 0;
    for (k = j; k < c->n && c->b[k] != '"'; k++)
        ;
    if (k >= c->n)
        return 0;
    /* a name that is a prefix of another is told apart by the quote after it */
    return in_tuple(c->names, c->b + j, k - j);
}

/* The general form (see the top of this file). */
static int general(const Ctx *c, Py_ssize_t i)
{
    const unsigned char *b = c->b;
    Py_ssize_t j;
    i = LIT(c, i, "{\"");
    if (i < 0 || wanted_artifact(c, i))
        return 0;
    if (LIT(c, i, "artifact\"") >= 0 && LIT(c, i, "artifact\": {\"name\": \"") < 0)
        return 0;
    if (word_in(c, i, c->types))
        return 0;
    j = i;
    while (j < c->n && IS_WORD(b[j]))
        j++;
    if (j == i)
        return 0;
    j = meta(c, LIT(c, j, "\": "));
    j = rank_and_torch_keys(c, j);
    if (j < 0)
        return 0;
    for (;;) { /* (?:, "(?!has_payload"|rank")[A-Za-z0-9_]++": SCALAR)*+ */
        Py_ssize_t k = LIT(c, j, ", \""), e;
        if (k < 0 || LIT(c, k, "has_payload\"") >= 0 || LIT(c, k, "rank\"") >= 0)
            break;
        e = k;
        while (e < c->n && IS_WORD(b[e]))
            e++;
        if (e == k)
            break;
        e = scalar(c, LIT(c, e, "\": "));
        if (e < 0)
            break;
        j = e;
    }
    if (payload_end(c, j))
        return 1;
    j = LIT(c, j, "}\n");
    return j >= 0 && (j >= c->n || b[j] != '\t');
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, limit, count = 0;
    int rank_mode;
    PyObject *rank_obj, *types, *names;
    Ctx c;
    if (!PyArg_ParseTuple(args, "y*nniOO!O!", &view, &pos, &limit, &rank_mode, &rank_obj,
                          &PyTuple_Type, &types, &PyTuple_Type, &names))
        return NULL;
    if (limit > view.len)
        limit = view.len;
    if (pos < 0)
        pos = 0;
    c.b = (const unsigned char *)view.buf;
    c.n = limit;
    c.rank_mode = rank_mode;
    c.rank = "";
    c.rank_len = 0;
    c.types = types;
    c.names = names;
    if (rank_mode == 1) {
        if (!PyBytes_Check(rank_obj)) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "rank_digits must be bytes");
            return NULL;
        }
        c.rank = PyBytes_AS_STRING(rank_obj);
        c.rank_len = PyBytes_GET_SIZE(rank_obj);
    }
    {
        Py_ssize_t p = -1, i = pos;
        for (;;) {
            Py_ssize_t k, s;
            i = next_stop(c.b, i, limit, &count);
            if (i < 0)
                break;
            s = i + 1;
            if (s < limit) {
                k = prefix(&c, s);
                if (k >= 0 && (common(&c, k) || general(&c, k))) {
                    count++;
                    i = s;
                    continue;
                }
            }
            p = i;
            break;
        }
        PyBuffer_Release(&view);
        return Py_BuildValue("nn", p, count);
    }
}

/* block_end(buf, a, limit) -> (e, newlines): the end of the payload lines after the newline at
 * `a`, as `re.compile(rb"\n[^\t]").search(buf, a, limit + 1)` finds it: the first newline e in
 * buf[a:limit] whose next byte is not a tab (-1: none), and the newlines in buf[a+1:e]
 * (buf[a+1:limit]). */
static PyObject *block_end(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t a, limit, count = 0, e;
    const unsigned char *b;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &a, &limit))
        return NULL;
    if (limit >= view.len)
        limit = view.len - 1;
    if (a < 0)
        a = 0;
    b = (const unsigned char *)view.buf;
    /* b[limit] is a newline: the next byte of a newline at limit - 1 is not a tab */
    e = a < limit ? next_stop(b, a, limit, &count) : -1;
    if (a < limit && b[a] == '\n' && e != a)
        count--; /* the newline at a is not one of the payload's */
    PyBuffer_Release(&view);
    return Py_BuildValue("nn", e, count);
}

static PyMethodDef methods[] = {
    {"block_end", block_end, METH_VARARGS,
     "block_end(buf, a, limit) -> (e, newlines): the first newline of buf[a:limit] not followed "
     "by a tab (-1: none), and the newlines in buf[a+1:e] (buf[a+1:limit])."},
    {"scan", scan, METH_VARARGS,
     "scan(buf, pos, limit, rank_mode, rank_digits, types, names) -> (p, newlines): the first "
     "newline of buf[pos:limit] whose next line may interest the reader (-1: none), and the "
     "newlines passed before it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tracekit.read._scan",
    "The scanner's inner loop in C: skip payload lines and unwanted envelopes (see _scan.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    return PyModule_Create(&module);
}
