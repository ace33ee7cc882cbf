/* logwatch.core.signatures._speedups: the literal pass's per-hit work in C.
 *
 * A serving vLLM log gives the literal prefilter hundreds of thousands of hits per gigabyte,
 * almost all on request-lifecycle lines (logwatch/core/lines/benign.py). In Python each costs
 * a call through Hyperscan's binding, a tuple, and a regular expression on its line. Here:
 *
 *   Hits(lengths)              a callable Hyperscan's binding calls per match: it keeps the
 *                              match's start offset and literal id in a C array.
 *   Hits.take(data, at_start)  those hits sorted, less those on request-lifecycle lines, as
 *                              (offset, literal id) tuples, and how many were passed over.
 *   is_benign(data, start)     whether the line at `start` is one (benign.BENIGN's grammar).
 *   newlines(data, start, end) how many b"\n" lie in data[start:end].
 *   lines_back(data, offset, count)
 *                              where the line `count` lines before the one at `offset`
 *                              starts, and how many of them there were (buffer_lines.walk).
 *   joiner_near(data, header, own, low, high, starts)
 *                              whether data[low:high] holds `header` (not at `own`) right
 *                              before one of `starts` (buffer_lines.BufferLines.joiner_near).
 *
 * The pure-Python path (`--engine python`, or where this does not build) stays the reference:
 * tests/test_speedups.py checks each function against it on random and crafted input.
 * Nothing here holds a pointer into a Python object beyond one call.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE  /* memmem, memrchr */
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* -- newline counting ---------------------------------------------------------------- */

static Py_ssize_t count_newlines(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t count = 0, i = 0;
#ifdef __SSE2__
    const __m128i nl = _mm_set1_epi8('\n');
    while (n - i >= 16) {
        /* up to 255 rounds of 16 bytes in 8-bit lanes, then summed */
        Py_ssize_t rounds = (n - i) / 16;
        if (rounds > 255)
            rounds = 255;
        __m128i acc = _mm_setzero_si128();
        for (Py_ssize_t r = 0; r < rounds; r++, i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, nl));
        }
        __m128i sums = _mm_sad_epu8(acc, _mm_setzero_si128());
        count += _mm_cvtsi128_si32(sums) + _mm_extract_epi16(sums, 4);
    }
#endif
    for (; i < n; i++)
        count += p[i] == '\n';
    return count;
}

static int clamp_range(Py_ssize_t len, Py_ssize_t *start, Py_ssize_t *end)
{
    /* bytes.count's slice rules */
    if (*start < 0) {
        *start += len;
        if (*start < 0)
            *start = 0;
    }
    if (*end < 0) {
        *end += len;
        if (*end < 0)
            *end = 0;
    }
    if (*end > len)
        *end = len;
    return *start < *end;
}

static int slice_index(PyObject *o, Py_ssize_t *out)
{
    /* bytes.count's: None is the default, an int beyond Py_ssize_t is clamped */
    if (o == NULL || o == Py_None)
        return 1;
    PyObject *index = PyNumber_Index(o);
    if (index == NULL)
        return 0;
    *out = PyNumber_AsSsize_t(index, NULL);
    Py_DECREF(index);
    return !(*out == -1 && PyErr_Occurred());
}

static PyObject *py_newlines(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *start_o = NULL, *end_o = NULL;
    Py_ssize_t start = 0, end = PY_SSIZE_T_MAX;
    if (!PyArg_ParseTuple(args, "y*|OO:newlines", &view, &start_o, &end_o))
        return NULL;
    if (!slice_index(start_o, &start) || !slice_index(end_o, &end)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t count = 0;
    if (clamp_range(view.len, &start, &end)) {
        const unsigned char *p = (const unsigned char *)view.buf + start;
        Py_ssize_t n = end - start;
        Py_BEGIN_ALLOW_THREADS
        count = count_newlines(p, n);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(count);
}

/* -- walking back over lines (buffer_lines.walk) -------------------------------------- */

static PyObject *py_lines_back(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t offset, count, walked = 0;
    if (!PyArg_ParseTuple(args, "y*nn:lines_back", &view, &offset, &count))
        return NULL;
    if (offset > view.len)
        offset = view.len;
    const char *p = (const char *)view.buf;
    /* the start of the line before the one at `offset`: after the last newline in
       data[:offset - 1] (the one at offset - 1 ends that line), or the buffer's start */
    while (walked < count && offset > 0) {
        const char *nl = offset > 1 ? memrchr(p, '\n', (size_t)(offset - 1)) : NULL;
        offset = nl != NULL ? (Py_ssize_t)(nl - p) + 1 : 0;
        walked++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nn", offset, walked);
}

/* -- a logger line's neighbours (buffer_lines.BufferLines.joiner_near) ----------------- */

static PyObject *py_joiner_near(PyObject *self, PyObject *args)
{
    Py_buffer data, header;
    Py_ssize_t own, low, high;
    PyObject *starts;
    if (!PyArg_ParseTuple(args, "y*y*nnnO!:joiner_near", &data, &header, &own, &low, &high,
                          &PyTuple_Type, &starts))
        return NULL;
    const char *p = data.buf;
    Py_ssize_t n = data.len, width = header.len, count = PyTuple_GET_SIZE(starts);
    int found = 0, bad = width == 0;
    for (Py_ssize_t k = 0; k < count; k++)
        bad |= !PyBytes_Check(PyTuple_GET_ITEM(starts, k));
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "joiner_near: a header and a tuple of bytes needed");
        goto out;
    }
    if (low < 0)
        low = 0;
    if (high > n)
        high = n;
    /* every occurrence wholly inside [low, high) */
    for (Py_ssize_t at = low; !found && high - at >= width;) {
        const char *hit = memmem(p + at, (size_t)(high - at), header.buf, (size_t)width);
        if (hit == NULL)
            break;
        Py_ssize_t s = hit - p;
        for (Py_ssize_t k = 0; s != own && k < count && !found; k++) {
            PyObject *start = PyTuple_GET_ITEM(starts, k);
            Py_ssize_t len = PyBytes_GET_SIZE(start);
            found = s + width + len <= n
                    && memcmp(p + s + width, PyBytes_AS_STRING(start), (size_t)len) == 0;
        }
        at = s + 1;
    }
out:
    PyBuffer_Release(&data);
    PyBuffer_Release(&header);
    if (PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(found);
}

/* -- request-lifecycle lines (benign.BENIGN) ------------------------------------------ */

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_word(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_space(unsigned char c)  /* `\s` of a bytes pattern */
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

typedef struct {
    const unsigned char *p;
    Py_ssize_t i, n;
} Cursor;

static int take_text(Cursor *c, const char *text)
{
    size_t len = strlen(text);
    if ((size_t)(c->n - c->i) < len || memcmp(c->p + c->i, text, len) != 0)
        return 0;
    c->i += len;
    return 1;
}

static int take_digits(Cursor *c, Py_ssize_t exactly)  /* exactly > 0, or 0: one or more */
{
    Py_ssize_t from = c->i;
    while (c->i < c->n && is_digit(c->p[c->i]) && (!exactly || c->i - from < exactly))
        c->i++;
    return exactly ? c->i - from == exactly : c->i > from;
}

enum { LEVEL_NONE, LEVEL_DEBUG, LEVEL_INFO, LEVEL_WARNING, LEVEL_ERROR };

/* `(?:\([A-Za-z_][\w.-]* pid=\d+\) )?LEVEL \d\d-\d\d \d\d:\d\d:\d\d \[[\w.-]+:\d+\] `:
 * the level read, the cursor after the header; LEVEL_NONE where it is not one. Every part
 * is followed by a character it cannot take, so reading it left to right is the regex's
 * one way to match. */
static int take_header(Cursor *c)
{
    if (c->i < c->n && c->p[c->i] == '(') {
        Py_ssize_t at = c->i + 1;
        if (at < c->n && (is_word(c->p[at]) && !is_digit(c->p[at]))) {
            at++;
            while (at < c->n && (is_word(c->p[at]) || c->p[at] == '.' || c->p[at] == '-'))
                at++;
            Cursor d = {c->p, at, c->n};
            if (take_text(&d, " pid=") && take_digits(&d, 0) && take_text(&d, ") "))
                c->i = d.i;
            else
                return LEVEL_NONE;  /* without the prefix the level would start at '(' */
        } else {
            return LEVEL_NONE;
        }
    }
    int level;
    if (take_text(c, "DEBUG"))
        level = LEVEL_DEBUG;
    else if (take_text(c, "INFO"))
        level = LEVEL_INFO;
    else if (take_text(c, "WARNING"))
        level = LEVEL_WARNING;
    else if (take_text(c, "ERROR"))
        level = LEVEL_ERROR;
    else
        return LEVEL_NONE;
    if (!(take_text(c, " ") && take_digits(c, 2) && take_text(c, "-") && take_digits(c, 2)
          && take_text(c, " ") && take_digits(c, 2) && take_text(c, ":") && take_digits(c, 2)
          && take_text(c, ":") && take_digits(c, 2) && take_text(c, " [")))
        return LEVEL_NONE;
    Py_ssize_t from = c->i;
    while (c->i < c->n && (is_word(c->p[c->i]) || c->p[c->i] == '.' || c->p[c->i] == '-'))
        c->i++;
    if (c->i == from || !take_text(c, ":") || !take_digits(c, 0) || !take_text(c, "] "))
        return LEVEL_NONE;
    return level;
}

static int line_is_benign(const unsigned char *p, Py_ssize_t n, Py_ssize_t start)
{
    Cursor c = {p, start, n};
    int level = take_header(&c);
    if (level == LEVEL_NONE)
        return 0;
    Py_ssize_t after_header = c.i;
    const unsigned char *nl = memchr(p + c.i, '\n', (size_t)(n - c.i));
    if (nl == NULL)
        return 0;  /* not complete: its newline is not there */
    Py_ssize_t line_end = nl - p;
    c.n = line_end;  /* nothing below reads past the line */

    /* the request logger's lines, any level: the rest of the line is theirs */
    if (take_text(&c, "Received request ") || take_text(&c, "Generated response "))
        return 1;
    if (take_text(&c, "Request ")) {
        Py_ssize_t from = c.i;
        while (c.i < c.n && !is_space(p[c.i]))
            c.i++;
        if (c.i > from && (take_text(&c, " details: prompt: ") || take_text(&c, " JSON body: ")))
            return 1;
    }
    if (level != LEVEL_INFO)
        return 0;
    c.i = after_header;
    if (!(take_text(&c, "Aborted request ") || take_text(&c, "Aborted request(s) ")
          || take_text(&c, "Added request ")))
        return 0;
    /* `[^\s,]+(?:,[^\s,]+)*\.\r?` up to the newline: ids that are one word each, comma-
     * separated, then a full stop */
    Py_ssize_t end = line_end;
    if (end > c.i && p[end - 1] == '\r')
        end--;
    if (end - c.i < 2 || p[end - 1] != '.')
        return 0;
    end--;
    int in_id = 0;
    for (Py_ssize_t i = c.i; i < end; i++) {
        unsigned char ch = p[i];
        if (ch == ',') {
            if (!in_id)
                return 0;
            in_id = 0;
        } else if (is_space(ch)) {
            return 0;
        } else {
            in_id = 1;
        }
    }
    return in_id;
}

static PyObject *py_is_benign(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*n:is_benign", &view, &start))
        return NULL;
    if (start < 0)
        start = 0;  /* as `re` takes a negative position */
    int benign = start <= view.len
                 && line_is_benign((const unsigned char *)view.buf, view.len, start);
    PyBuffer_Release(&view);
    return PyBool_FromLong(benign);
}

/* -- Hits ----------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    uint32_t *lengths;  /* each literal's length, by id */
    Py_ssize_t literals;
    uint64_t *hits;     /* start offset << 20 | literal id */
    Py_ssize_t size, capacity;
} Hits;

#define ID_BITS 20
#define MAX_LITERALS (1 << ID_BITS)

static void Hits_dealloc(Hits *self)
{
    PyMem_Free(self->lengths);
    PyMem_Free(self->hits);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Hits_init(Hits *self, PyObject *args, PyObject *kwds)
{
    PyObject *lengths;
    if (!PyArg_ParseTuple(args, "O:Hits", &lengths))
        return -1;
    PyObject *seq = PySequence_Fast(lengths, "Hits: lengths must be a sequence");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_LITERALS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "Hits: too many literals");
        return -1;
    }
    PyMem_Free(self->lengths);
    self->literals = 0;
    self->lengths = PyMem_Calloc(n ? n : 1, sizeof(uint32_t));
    if (self->lengths == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    self->literals = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (len < 0 || len > UINT32_MAX) {
            Py_DECREF(seq);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "Hits: a length out of range");
            return -1;
        }
        self->lengths[i] = (uint32_t)len;
    }
    Py_DECREF(seq);
    self->size = 0;
    return 0;
}

static int unsigned_index(PyObject *o, unsigned long long *out)
{
    PyObject *index = PyNumber_Index(o);
    if (index == NULL)
        return 0;
    *out = PyLong_AsUnsignedLongLong(index);
    Py_DECREF(index);
    return !(*out == (unsigned long long)-1 && PyErr_Occurred());
}

/* Hyperscan's binding calls it as callback(id, from, to, flags, context) */
static PyObject *Hits_call(Hits *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) < 3) {
        PyErr_SetString(PyExc_TypeError, "Hits: called with (id, from, to, ...)");
        return NULL;
    }
    unsigned long long id, to;
    if (!unsigned_index(PyTuple_GET_ITEM(args, 0), &id)
        || !unsigned_index(PyTuple_GET_ITEM(args, 2), &to))
        return NULL;
    if (id >= (unsigned long long)self->literals || to < self->lengths[id]
        || (to >> (64 - ID_BITS)) != 0) {
        PyErr_SetString(PyExc_ValueError, "Hits: a match out of range");
        return NULL;
    }
    if (self->size == self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 4096;
        uint64_t *grown = PyMem_Realloc(self->hits, (size_t)capacity * sizeof(uint64_t));
        if (grown == NULL)
            return PyErr_NoMemory();
        self->hits = grown;
        self->capacity = capacity;
    }
    self->hits[self->size++] = ((uint64_t)(to - self->lengths[id]) << ID_BITS) | id;
    Py_RETURN_NONE;
}

static int compare_hits(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Hyperscan reports in order of end offset: starts are nearly sorted already */
static void sort_hits(uint64_t *hits, Py_ssize_t n)
{
    Py_ssize_t i = 1;
    while (i < n && hits[i - 1] <= hits[i])
        i++;
    if (i < n)
        qsort(hits, (size_t)n, sizeof(uint64_t), compare_hits);
}

static PyObject *hit_tuple(uint64_t hit)
{
    return Py_BuildValue("(KI)", (unsigned long long)(hit >> ID_BITS),
                         (unsigned int)(hit & (MAX_LITERALS - 1)));
}

static PyObject *Hits_take(Hits *self, PyObject *args)
{
    Py_buffer view;
    int at_line_start;
    if (!PyArg_ParseTuple(args, "y*p:take", &view, &at_line_start))
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len;
    /* the hits are this call's from here on: a finalizer run while tuples are made may
     * call the collector again, and starts a buffer of its own */
    uint64_t *hits = self->hits;
    Py_ssize_t size = self->size;
    self->hits = NULL;
    self->size = self->capacity = 0;
    sort_hits(hits, size);
    PyObject *kept = PyList_New(0);
    if (kept == NULL) {
        PyMem_Free(hits);
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t passed = 0, line_end = -1, passed_end = -1;
    for (Py_ssize_t k = 0; k < size; k++) {
        uint64_t hit = hits[k];
        Py_ssize_t offset = (Py_ssize_t)(hit >> ID_BITS);
        if (offset > n) {
            PyErr_SetString(PyExc_ValueError, "Hits.take: a hit beyond the data");
            goto fail;
        }
        int benign;
        if (offset < line_end) {  /* a line already judged */
            benign = offset < passed_end;
        } else {
            Py_ssize_t start = offset;
            while (start > 0 && p[start - 1] != '\n')
                start--;
            const unsigned char *nl = memchr(p + offset, '\n', (size_t)(n - offset));
            line_end = nl ? nl - p : n;
            benign = (start || at_line_start) && line_is_benign(p, n, start);
            if (benign)
                passed_end = line_end;
        }
        if (benign) {
            passed++;
        } else {
            PyObject *t = hit_tuple(hit);
            if (t == NULL || PyList_Append(kept, t) < 0) {
                Py_XDECREF(t);
                goto fail;
            }
            Py_DECREF(t);
        }
    }
    PyMem_Free(hits);
    PyBuffer_Release(&view);
    return Py_BuildValue("(Nn)", kept, passed);
fail:
    PyMem_Free(hits);
    Py_DECREF(kept);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *Hits_sorted(Hits *self, PyObject *unused)
{
    uint64_t *hits = self->hits;  /* this call's (see Hits_take) */
    Py_ssize_t size = self->size;
    self->hits = NULL;
    self->size = self->capacity = 0;
    sort_hits(hits, size);
    PyObject *list = PyList_New(size);
    for (Py_ssize_t k = 0; list != NULL && k < size; k++) {
        PyObject *t = hit_tuple(hits[k]);
        if (t == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, k, t);
    }
    PyMem_Free(hits);
    return list;
}

static PyMethodDef Hits_methods[] = {
    {"take", (PyCFunction)Hits_take, METH_VARARGS,
     "take(data, at_line_start) -> (hits, passed): the hits kept since the last take, "
     "sorted, less those on request-lifecycle lines, and how many those were"},
    {"sorted", (PyCFunction)Hits_sorted, METH_NOARGS,
     "sorted() -> hits: every hit kept since the last take, sorted"},
    {NULL},
};

static PyTypeObject HitsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "logwatch.core.signatures._speedups.Hits",
    .tp_basicsize = sizeof(Hits),
    .tp_dealloc = (destructor)Hits_dealloc,
    .tp_call = (ternaryfunc)Hits_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Hits(lengths): Hyperscan's match callback, keeping (start, literal id) in C",
    .tp_methods = Hits_methods,
    .tp_init = (initproc)Hits_init,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef module_methods[] = {
    {"newlines", py_newlines, METH_VARARGS,
     "newlines(data, start=0, end=len) -> how many b'\\n' lie in data[start:end]"},
    {"lines_back", py_lines_back, METH_VARARGS,
     "lines_back(data, offset, count) -> (offset, walked): where the line `count` lines "
     "before the one starting at `offset` starts, walking at most to the buffer's start"},
    {"joiner_near", py_joiner_near, METH_VARARGS,
     "joiner_near(data, header, own, low, high, starts) -> whether data[low:high] holds "
     "`header` (not at `own`) right before one of `starts`"},
    {"is_benign", py_is_benign, METH_VARARGS,
     "is_benign(data, start) -> whether the line at start is a complete request-lifecycle "
     "line (logwatch.core.lines.benign)"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "logwatch.core.signatures._speedups",
    "The literal pass's per-hit work in C (see _speedups.c)", -1, module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    if (PyType_Ready(&HitsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&HitsType);
    if (PyModule_AddObject(m, "Hits", (PyObject *)&HitsType) < 0) {
        Py_DECREF(&HitsType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
