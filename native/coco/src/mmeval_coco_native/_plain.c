/* COCODetection's batch of plain inputs, checked and converted in one call.
 *
 * read_plain(preds, gts, ndarray, integer, n_cls, segm) is what mmeval.metrics.coco_inputs_batched's
 * pure _read_plain does with numpy for a whole add(), number for number: where every image is a dict (exactly)
 * of numpy arrays (exactly np.ndarray, native byte order, a float16/32/64 or (u)int8..64 dtype) of the shapes
 * it checks and int / np.integer (or no) ids, and every number passes its checks (finite; labels whole, in
 * [0, n_cls)), the batch's fields joined and converted; None otherwise -- the caller then runs the pure
 * reading, which names nothing either and leaves the naming of a bad image to read_image. The float64
 * conversions and the xyxy -> xywh subtractions and the areas are numpy's operations, one by one (the module
 * is built without contraction). Only the CPython buffer protocol is used, strided arrays read in place.
 * Written for mmeval. */
#include "_plain.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { K_BBOXES, K_SCORES, K_LABELS, K_MASK_SCORES, K_MASKS, K_IGNORE, K_IMG_ID, N_KEYS };
static const char *KEY_NAMES[N_KEYS] = {"bboxes", "scores", "labels", "mask_scores", "masks", "ignore_flags", "img_id"};
static PyObject *KEYS[N_KEYS];

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *Py_NewRef(PyObject *o) {  /* CPython 3.10's */
    Py_INCREF(o);
    return o;
}
#endif

/* Item i of list l replaced by v (a new reference, stolen). */
static void list_put(PyObject *l, Py_ssize_t i, PyObject *v) {
    PyObject *old = PyList_GET_ITEM(l, i);
    PyList_SET_ITEM(l, i, v);
    Py_XDECREF(old);
}

int plain_init(void) {
    for (int k = 0; k < N_KEYS; k++)
        if (!(KEYS[k] = PyUnicode_InternFromString(KEY_NAMES[k]))) return -1;
    return 0;
}

/* One plain array: its buffer (held or not) and its element type (a struct-module code). */
typedef struct {
    Py_buffer b;
    int held;
    char code;
} Arr;

/* 1 where v is an np.ndarray (exactly) of ndim dimensions and a plain dtype, its buffer then held in a; 0 for
 * any other value (nothing held). */
static int plain_array(PyObject *v, PyTypeObject *ndarray, int ndim, Arr *a) {
    if (!v || Py_TYPE(v) != ndarray) return 0;
    if (PyObject_GetBuffer(v, &a->b, PyBUF_RECORDS_RO) < 0) {  /* e.g. a datetime dtype: no buffer */
        PyErr_Clear();
        return 0;
    }
    a->held = 1;
    const char *f = a->b.format;
    /* numpy writes a native, plain dtype as its one struct code, no byte-order prefix ('>f' is big-endian) */
    if (a->b.ndim != ndim || !f || f[0] == '\0' || f[1] != '\0' || !strchr("efdbhilqBHILQ", f[0])) return 0;
    a->code = f[0];
    return 1;
}

static void release(Arr *a) {
    if (a->held) PyBuffer_Release(&a->b);
    a->held = 0;
}

/* IEEE half to double, exactly (numpy's astype). */
static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp((double)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp((double)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* The element at byte offset off of a as float64, as numpy's astype(np.float64) converts it. */
static inline double elem(const Arr *a, Py_ssize_t off) {
    const char *p = (const char *)a->b.buf + off;
#define AS(T) do { T x; memcpy(&x, p, sizeof x); return (double)x; } while (0)
    switch (a->code) {
        case 'd': AS(double);
        case 'f': AS(float);
        case 'e': { uint16_t x; memcpy(&x, p, 2); return half_to_double(x); }
        case 'b': AS(int8_t);
        case 'B': AS(uint8_t);
        case 'h': AS(int16_t);
        case 'H': AS(uint16_t);
        case 'i': AS(int32_t);
        case 'I': AS(uint32_t);
        case 'l': if (a->b.itemsize == 4) AS(int32_t); AS(int64_t);
        case 'L': if (a->b.itemsize == 4) AS(uint32_t); AS(uint64_t);
        case 'q': AS(int64_t);
        default: AS(uint64_t);  /* 'Q' */
    }
#undef AS
}

/* Item i (of a 1-d array) or element (i, j) (of a 2-d one). */
static inline double at1(const Arr *a, Py_ssize_t i) { return elem(a, i * a->b.strides[0]); }
static inline double at2(const Arr *a, Py_ssize_t i, Py_ssize_t j) {
    return elem(a, i * a->b.strides[0] + j * a->b.strides[1]);
}

/* _plain_id: 1 where v (NULL: absent) is None, an int (exactly) or an np.integer; 0 for any other value; -1 on
 * an error. */
static int plain_id(PyObject *v, PyObject *integer) {
    if (!v || v == Py_None || PyLong_CheckExact(v)) return 1;
    return PyObject_IsInstance(v, integer);
}

static void release_held(PyObject **held, int *n_held) {
    while (*n_held > 0) Py_DECREF(held[--*n_held]);
}

enum { A_BOX, A_SCORE, A_LABEL, A_MSCORE, A_GBOX, A_GLABEL, A_FLAG, N_ARR };

static PyObject *new_bytes(Py_ssize_t n) { return PyByteArray_FromStringAndSize(NULL, n); }

/* read_plain(preds, gts, ndarray, integer, n_cls, segm) -> None or (xywh f8 (K, 4), scores f8, labels i8,
 * mask scores f8 (None without segm), gt xywh f8 (M, 4), gt labels i8, crowd bool (ignore flag != 0), gt areas
 * f8 (w * h), d_at, g_at (lists of N + 1 ints), ids (list), has_mask_scores (bytes, N), det masks (p['masks'];
 * None without segm), gt masks (g.get('masks')) (lists of N objects)): every array a bytearray (writable), the
 * images' rows one after another.
 * The images' fields as coco_inputs_batched._read_plain reads them (see the top of this file). */
PyObject *py_read_plain(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *preds, *gts, *integer;
    PyTypeObject *ndarray;
    Py_ssize_t n_cls;
    int segm;
    if (!PyArg_ParseTuple(args, "OOO!Onp", &preds, &gts, &PyType_Type, &ndarray, &integer, &n_cls, &segm))
        return NULL;
    PyObject *fp = NULL, *fg = NULL, *ids = NULL, *dmasks = NULL, *gmasks = NULL, *d_at = NULL, *g_at = NULL;
    PyObject *has_ms = NULL, *out[8] = {NULL};
    PyObject *result = NULL;
    Arr *arrs = NULL;
    /* the image at hand's dicts and values, held: an id's comparison or __index__ may run Python code, which
     * may change the dicts or the lists (the sequence's items and the dicts' values are otherwise borrowed) */
    PyObject *held[2 + 2 * N_KEYS + 1];
    int n_held = 0;
    int plain = 0;  /* 1 once every image passed; -1 on an error (the exception set) */
    Py_ssize_t n = 0, K = 0, M = 0;
    if (!(fp = PySequence_Fast(preds, "preds")) || !(fg = PySequence_Fast(gts, "gts"))) {
        PyErr_Clear();
        goto done;
    }
    n = PySequence_Fast_GET_SIZE(fp);
    if (PySequence_Fast_GET_SIZE(fg) != n) goto done;
    arrs = PyMem_Calloc((size_t)n * N_ARR, sizeof(Arr));
    ids = PyList_New(n);
    d_at = PyList_New(n + 1);
    g_at = PyList_New(n + 1);
    has_ms = PyBytes_FromStringAndSize(NULL, n);
    dmasks = PyList_New(n);
    gmasks = PyList_New(n);
    if (!arrs || !ids || !d_at || !g_at || !has_ms || !dmasks || !gmasks) {
        if (!arrs) PyErr_NoMemory();
        plain = -1;
        goto done;
    }
    for (Py_ssize_t i = 0; i <= n; i++) {  /* every list item set: a list left half filled is never seen */
        if (i < n) {
            PyList_SET_ITEM(ids, i, Py_NewRef(Py_None));
            PyList_SET_ITEM(dmasks, i, Py_NewRef(Py_None));
            PyList_SET_ITEM(gmasks, i, Py_NewRef(Py_None));
        }
        PyList_SET_ITEM(d_at, i, Py_NewRef(Py_None));
        PyList_SET_ITEM(g_at, i, Py_NewRef(Py_None));
    }
    char *ms_given = PyBytes_AS_STRING(has_ms);
    /* pass 1: the types and shapes (_read_plain's first loop), the ids, the sizes */
    for (Py_ssize_t i = 0; i < n; i++) {
        /* the pure reading's steps in its order, where Python code may run in between (an id's __ne__ or
         * __int__, a key's __eq__): the boxes, scores, labels, flags and ids looked up, the ids compared, then
         * the mask scores and masks looked up, then the id made an int */
        release_held(held, &n_held);
        PyObject *p = PySequence_Fast_GET_ITEM(fp, i), *g = PySequence_Fast_GET_ITEM(fg, i);
        held[n_held++] = Py_NewRef(p);
        held[n_held++] = Py_NewRef(g);
        if (!PyDict_CheckExact(p) || !PyDict_CheckExact(g)) goto done;
        PyObject *v[N_KEYS] = {NULL}, *w[N_KEYS] = {NULL};
        static const int first_keys[] = {K_BBOXES, K_SCORES, K_LABELS, K_IGNORE, K_IMG_ID};
        for (int q = 0; q < 5; q++) {
            int k = first_keys[q];
            if (k != K_IGNORE) {
                v[k] = PyDict_GetItemWithError(p, KEYS[k]);  /* NULL: absent */
                if (!v[k] && PyErr_Occurred()) { plain = -1; goto done; }
                if (v[k]) held[n_held++] = Py_NewRef(v[k]);
            }
            if (k != K_SCORES) {
                w[k] = PyDict_GetItemWithError(g, KEYS[k]);
                if (!w[k] && PyErr_Occurred()) { plain = -1; goto done; }
                if (w[k]) held[n_held++] = Py_NewRef(w[k]);
            }
        }
        Arr *a = arrs + i * N_ARR;
        if (!plain_array(v[K_BBOXES], ndarray, 2, &a[A_BOX]) || !plain_array(v[K_SCORES], ndarray, 1, &a[A_SCORE]) ||
            !plain_array(v[K_LABELS], ndarray, 1, &a[A_LABEL]) || !plain_array(w[K_BBOXES], ndarray, 2, &a[A_GBOX]) ||
            !plain_array(w[K_LABELS], ndarray, 1, &a[A_GLABEL]))
            goto done;
        Py_ssize_t k = a[A_BOX].b.shape[0], m = a[A_GBOX].b.shape[0];
        if (a[A_BOX].b.shape[1] != 4 || a[A_SCORE].b.shape[0] != k || a[A_LABEL].b.shape[0] != k ||
            a[A_GBOX].b.shape[1] != 4 || a[A_GLABEL].b.shape[0] != m)
            goto done;
        if (w[K_IGNORE] && (!plain_array(w[K_IGNORE], ndarray, 1, &a[A_FLAG]) || a[A_FLAG].b.shape[0] != m))
            goto done;  /* absent: all zeros */
        PyObject *pid = v[K_IMG_ID] && v[K_IMG_ID] != Py_None ? v[K_IMG_ID] : NULL;
        PyObject *gid = w[K_IMG_ID] && w[K_IMG_ID] != Py_None ? w[K_IMG_ID] : NULL;
        int ok = plain_id(pid, integer);
        if (ok == 1) ok = plain_id(gid, integer);
        if (ok == 1 && pid && gid) {  /* pid != gid, as Python evaluates it (no identity shortcut) */
            PyObject *ne = PyObject_RichCompare(pid, gid, Py_NE);
            int t = ne ? PyObject_IsTrue(ne) : -1;
            Py_XDECREF(ne);
            ok = t < 0 ? -1 : !t;
        }
        if (ok != 1) {
            plain = ok < 0 ? -1 : 0;
            goto done;
        }
        if (segm) {  /* the mask scores given, else the scores; the masks given (None or not) */
            PyObject *ms = PyDict_GetItemWithError(p, KEYS[K_MASK_SCORES]);
            if (!ms && PyErr_Occurred()) { plain = -1; goto done; }
            if (ms) held[n_held++] = Py_NewRef(ms);
            int has = PyDict_Contains(p, KEYS[K_MASKS]);
            if (has < 0) { plain = -1; goto done; }
            if (!has) goto done;
            if (ms && (!plain_array(ms, ndarray, 1, &a[A_MSCORE]) || a[A_MSCORE].b.shape[0] != k)) goto done;
        }
        PyObject *id = gid ? gid : pid;
        if (id) {  /* int(id) */
            PyObject *as_int = PyNumber_Long(id);
            if (!as_int) { plain = -1; goto done; }
            list_put(ids, i, as_int);
        }
        K += k;
        M += m;
    }
    release_held(held, &n_held);
    /* pass 2: the numbers (_read_plain's joined arrays and their checks) */
    Py_ssize_t sizes[8] = {32 * K, 8 * K, 8 * K, segm ? 8 * K : 0, 32 * M, 8 * M, M, 8 * M};
    for (int j = 0; j < 8; j++) {
        if (j == 3 && !segm) continue;
        if (!(out[j] = new_bytes(sizes[j]))) { plain = -1; goto done; }
    }
    double *xywh = (double *)PyByteArray_AS_STRING(out[0]), *score = (double *)PyByteArray_AS_STRING(out[1]);
    int64_t *label = (int64_t *)PyByteArray_AS_STRING(out[2]);
    double *mscore = segm ? (double *)PyByteArray_AS_STRING(out[3]) : NULL;
    double *gxywh = (double *)PyByteArray_AS_STRING(out[4]), *garea = (double *)PyByteArray_AS_STRING(out[7]);
    int64_t *glabel = (int64_t *)PyByteArray_AS_STRING(out[5]);
    char *crowd = PyByteArray_AS_STRING(out[6]);
    const double cls = (double)n_cls;
    Py_ssize_t d = 0, q = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Arr *a = arrs + i * N_ARR;
        PyObject *at = PyLong_FromSsize_t(d), *gat = PyLong_FromSsize_t(q);
        if (!at || !gat) { Py_XDECREF(at); Py_XDECREF(gat); plain = -1; goto done; }
        list_put(d_at, i, at);
        list_put(g_at, i, gat);
        Py_ssize_t k = a[A_BOX].b.shape[0], m = a[A_GBOX].b.shape[0];
        const Arr *ms = a[A_MSCORE].held ? &a[A_MSCORE] : &a[A_SCORE];
        for (Py_ssize_t r = 0; r < k; r++, d++) {
            double x0 = at2(&a[A_BOX], r, 0), y0 = at2(&a[A_BOX], r, 1), x1 = at2(&a[A_BOX], r, 2);
            double y1 = at2(&a[A_BOX], r, 3), s = at1(&a[A_SCORE], r), l = at1(&a[A_LABEL], r);
            double t = segm ? at1(ms, r) : 0.0;
            if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1) || !isfinite(s) || !isfinite(t) ||
                !isfinite(l) || l != floor(l) || l < 0 || l >= cls)
                goto done;
            xywh[4 * d] = x0;
            xywh[4 * d + 1] = y0;
            xywh[4 * d + 2] = x1 - x0;
            xywh[4 * d + 3] = y1 - y0;
            score[d] = s;
            label[d] = (int64_t)l;
            if (segm) mscore[d] = t;
        }
        for (Py_ssize_t r = 0; r < m; r++, q++) {
            double x0 = at2(&a[A_GBOX], r, 0), y0 = at2(&a[A_GBOX], r, 1), x1 = at2(&a[A_GBOX], r, 2);
            double y1 = at2(&a[A_GBOX], r, 3), l = at1(&a[A_GLABEL], r);
            double f = a[A_FLAG].held ? at1(&a[A_FLAG], r) : 0.0;
            if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1) || !isfinite(f) || !isfinite(l) ||
                l != floor(l) || l < 0 || l >= cls)
                goto done;
            double gw = x1 - x0, gh = y1 - y0;
            gxywh[4 * q] = x0;
            gxywh[4 * q + 1] = y0;
            gxywh[4 * q + 2] = gw;
            gxywh[4 * q + 3] = gh;
            garea[q] = gw * gh;
            glabel[q] = (int64_t)l;
            crowd[q] = f != 0.0;
        }
    }
    {
        PyObject *at = PyLong_FromSsize_t(d), *gat = PyLong_FromSsize_t(q);
        if (!at || !gat) { Py_XDECREF(at); Py_XDECREF(gat); plain = -1; goto done; }
        list_put(d_at, n, at);
        list_put(g_at, n, gat);
    }
    for (Py_ssize_t i = 0; i < n; i++) {  /* whether mask scores were given, the masks: last, as the pure reading */
        PyObject *p = PySequence_Fast_GET_ITEM(fp, i), *g = PySequence_Fast_GET_ITEM(fg, i);
        if (!PyDict_CheckExact(p) || !PyDict_CheckExact(g)) goto done;  /* replaced since: the pure path decides */
        ms_given[i] = 0;
        if (segm) {
            int given = PyDict_Contains(p, KEYS[K_MASK_SCORES]);
            if (given < 0) { plain = -1; goto done; }
            ms_given[i] = (char)given;
            PyObject *dm = PyDict_GetItemWithError(p, KEYS[K_MASKS]);
            if (!dm) {  /* p['masks']: gone since (some Python code above removed it) */
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, KEYS[K_MASKS]);
                plain = -1;
                goto done;
            }
            list_put(dmasks, i, Py_NewRef(dm));
        }
        PyObject *gm = PyDict_GetItemWithError(g, KEYS[K_MASKS]);
        if (!gm && PyErr_Occurred()) { plain = -1; goto done; }
        if (gm) list_put(gmasks, i, Py_NewRef(gm));
    }
    plain = 1;
    result = Py_BuildValue("(OOOOOOOOOOOOOO)", out[0], out[1], out[2], segm ? out[3] : Py_None, out[4], out[5],
                           out[6], out[7], d_at, g_at, ids, has_ms, dmasks, gmasks);
done:
    release_held(held, &n_held);
    if (arrs) {
        for (Py_ssize_t i = 0; i < n * N_ARR; i++) release(&arrs[i]);
        PyMem_Free(arrs);
    }
    for (int j = 0; j < 8; j++) Py_XDECREF(out[j]);
    Py_XDECREF(fp); Py_XDECREF(fg); Py_XDECREF(ids); Py_XDECREF(dmasks); Py_XDECREF(gmasks);
    Py_XDECREF(d_at); Py_XDECREF(g_at); Py_XDECREF(has_ms);
    if (plain < 0) return NULL;
    if (plain == 0) Py_RETURN_NONE;
    return result;
}
