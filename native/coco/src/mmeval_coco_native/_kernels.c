/* mmeval-coco-native: COCODetection's per-image matching and its accumulation, in C.
 *
 * The same numbers as the pure numpy path of mmeval.metrics.coco_matching / coco_accumulate, float
 * operation for float operation (built with -ffp-contract=off: no fused multiply-adds).  Only the
 * CPython buffer protocol is used (no numpy headers): arrays arrive as C-contiguous buffers of the
 * dtype the Python wrapper (mmeval.metrics.coco_native) checked.  Written for mmeval.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <float.h>
#include <math.h>

#include "_blocks.h"
#include "_plain.h"

#define TRITS 40
enum { ST_IGNORED = 0, ST_TP = 1, ST_FP = 2 };

static uint64_t POW3[TRITS];
static uint8_t TRITS5[243][5];  /* the five base-3 digits of 0 .. 242, lowest first */
/* which of eight base-3 digits (0 .. 6560, lowest first) are ST_TP (the low byte's bits) and which ST_FP (the high
 * byte's) */
static uint16_t TF8[6561];

#if defined(_MSC_VER)
#include <intrin.h>
static inline int ctz64(uint64_t x) { unsigned long i; _BitScanForward64(&i, x); return (int)i; }
static inline int64_t popcount64(uint64_t x) { return (int64_t)__popcnt64(x); }
#if defined(_M_X64) || defined(_M_IX86)
#define PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#else
#define PREFETCH(p) ((void)(p))  /* MSVC on ARM: no prefetch (the same results, only slower) */
#endif
#else
static inline int ctz64(uint64_t x) { return __builtin_ctzll(x); }
#if defined(__POPCNT__) || defined(__aarch64__)
static inline int64_t popcount64(uint64_t x) { return (int64_t)__builtin_popcountll(x); }
#else
/* without the popcnt instruction in the target (x86-64's baseline) __builtin_popcountll is a libgcc call:
 * the bit-parallel count inline is faster */
static inline int64_t popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int64_t)((x * 0x0101010101010101ULL) >> 56);
}
#endif
#define PREFETCH(p) __builtin_prefetch(p)
#endif
#define AHEAD 16  /* detections ahead whose ranked state words and places are prefetched */

/* a 64 x 64 bit matrix transposed in place: bit r of a[i] becomes bit i of a[r] (blocks swapped, halving); two
 * at once (independent work to overlap), each round's shift a constant (so the compiler can use vectors) */
#define TRANSPOSE_ROUND(a, b, J, MASK)                                   \
    for (int base = 0; base < 64; base += 2 * (J))                       \
        for (int k = base; k < base + (J); k++) {                        \
            uint64_t t = (((a)[k] >> (J)) ^ (a)[k + (J)]) & (MASK);      \
            uint64_t u = (((b)[k] >> (J)) ^ (b)[k + (J)]) & (MASK);      \
            (a)[k] ^= t << (J);                                          \
            (a)[k + (J)] ^= t;                                           \
            (b)[k] ^= u << (J);                                          \
            (b)[k + (J)] ^= u;                                           \
        }
static inline void transpose64x2(uint64_t *a, uint64_t *b) {
    TRANSPOSE_ROUND(a, b, 32, 0x00000000FFFFFFFFULL)
    TRANSPOSE_ROUND(a, b, 16, 0x0000FFFF0000FFFFULL)
    TRANSPOSE_ROUND(a, b, 8, 0x00FF00FF00FF00FFULL)
    TRANSPOSE_ROUND(a, b, 4, 0x0F0F0F0F0F0F0F0FULL)
    TRANSPOSE_ROUND(a, b, 2, 0x3333333333333333ULL)
    TRANSPOSE_ROUND(a, b, 1, 0x5555555555555555ULL)
}
#undef TRANSPOSE_ROUND

/* numpy's pairwise sum of n contiguous doubles (DOUBLE_pairwise_sum): what ndarray.sum(axis=-1) gives */
static double pairwise_sum(const double *a, Py_ssize_t n) {
    if (n < 8) {
        double res = 0.;
        for (Py_ssize_t i = 0; i < n; i++) res += a[i];
        return res;
    } else if (n <= 128) {
        double r[8], res;
        Py_ssize_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    } else {
        Py_ssize_t n2 = n / 2;
        n2 -= n2 % 8;
        return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
    }
}

/* ---- matching ------------------------------------------------------------------------------- */

/* match(d_key i8[n], d_box f8[n*4], g_key i8[G], g_box f8[G*4], g_crowd u1[G], g_ig u1[G], g_idnz u1[G],
 *       d_out u1[n*A], thr f8[T], n_rng, iou f8[pairs] or None, words u8[n*W] (out, zeroed))
 * Detections: the kept ones in (group, score) order; ground truths sorted by group, in their order.
 * Returns the number of (detection, ground truth) pairs. */
static PyObject *py_match(PyObject *self, PyObject *args) {
    Py_buffer bdk, bdb, bgk, bgb, bgc, bgi, bgz, bdo, bth, bw, biou;
    PyObject *iou_obj;
    int n_rng;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*iOw*", &bdk, &bdb, &bgk, &bgb, &bgc, &bgi, &bgz, &bdo, &bth,
                          &n_rng, &iou_obj, &bw))
        return NULL;
    int have_iou = iou_obj != Py_None;
    if (have_iou && PyObject_GetBuffer(iou_obj, &biou, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&bdk); PyBuffer_Release(&bdb); PyBuffer_Release(&bgk); PyBuffer_Release(&bgb);
        PyBuffer_Release(&bgc); PyBuffer_Release(&bgi); PyBuffer_Release(&bgz); PyBuffer_Release(&bdo);
        PyBuffer_Release(&bth); PyBuffer_Release(&bw);
        return NULL;
    }
    const int64_t *d_key = bdk.buf, *g_key = bgk.buf;
    const double *d_box = bdb.buf, *g_box = bgb.buf, *thr = bth.buf;
    const uint8_t *g_crowd = bgc.buf, *g_ig = bgi.buf, *g_idnz = bgz.buf, *d_out = bdo.buf;
    const double *iou_in = have_iou ? (const double *)biou.buf : NULL;
    uint64_t *words = bw.buf;
    Py_ssize_t n = bdk.len / 8, G = bgk.len / 8, T = bth.len / 8, A = n_rng;
    Py_ssize_t rows = A * T, W = (rows + TRITS - 1) / TRITS;
    Py_ssize_t pairs = 0;
    Py_ssize_t gmax = 1;
    /* the largest group of ground truths */
    for (Py_ssize_t lo = 0; lo < G;) {
        Py_ssize_t hi = lo;
        while (hi < G && g_key[hi] == g_key[lo]) hi++;
        if (hi - lo > gmax) gmax = hi - lo;
        lo = hi;
    }
    double *iou = malloc(sizeof(double) * gmax);
    uint8_t *taken = malloc((size_t)rows * gmax);
    int8_t *st = malloc(rows);
    /* the words of a detection that matches nothing, per pattern of its outside flags (A <= 8 area ranges) */
    uint64_t *none_words = A <= 8 ? calloc((size_t)W << A, sizeof(uint64_t)) : NULL;
    if (!iou || !taken || !st || (A <= 8 && !none_words)) {
        free(iou); free(taken); free(st); free(none_words); PyErr_NoMemory(); goto done;
    }
    double thr_min = T ? thr[0] : 0.0;
    for (Py_ssize_t t = 1; t < T; t++) thr_min = thr[t] < thr_min ? thr[t] : thr_min;
    if (none_words)
        for (Py_ssize_t pat = 0; pat < ((Py_ssize_t)1 << A); pat++)
            for (Py_ssize_t r = 0; r < rows; r++)
                if (!((pat >> (r / T)) & 1)) none_words[pat * W + r / TRITS] += (uint64_t)ST_FP * POW3[r % TRITS];
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t gp = 0;  /* first ground truth of the current detection's group */
    int64_t cur = INT64_MIN;
    Py_ssize_t glo = 0, ghi = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (d_key[i] != cur) {  /* a new group: its ground truths, nothing taken yet */
            cur = d_key[i];
            while (gp < G && g_key[gp] < cur) gp++;
            glo = gp;
            ghi = glo;
            while (ghi < G && g_key[ghi] == cur) ghi++;
            memset(taken, 0, (size_t)rows * (ghi - glo > 0 ? ghi - glo : 1));
        }
        Py_ssize_t ng = ghi - glo;
        const double *db = d_box + 4 * i;
        for (Py_ssize_t g = 0; g < ng; g++) {
            if (have_iou) { iou[g] = iou_in[pairs + g]; continue; }
            /* pycocotools' bbIou, operation for operation */
            const double *gb = g_box + 4 * (glo + g);
            double da = db[2] * db[3], ga = gb[2] * gb[3];
            double w = (db[2] + db[0] < gb[2] + gb[0] ? db[2] + db[0] : gb[2] + gb[0]) - (db[0] > gb[0] ? db[0] : gb[0]);
            double h = (db[3] + db[1] < gb[3] + gb[1] ? db[3] + db[1] : gb[3] + gb[1]) - (db[1] > gb[1] ? db[1] : gb[1]);
            double in = w * h;
            double u = g_crowd[glo + g] ? da : da + ga - in;
            iou[g] = (w > 0 && h > 0) ? in / u : 0.0;
        }
        pairs += ng;
        int any = 0;  /* a candidate at some threshold: else every state is FP (IGNORED outside its area range) */
        for (Py_ssize_t g = 0; g < ng && !any; g++) any = !(iou[g] < thr_min);  /* as the loop below reads a NaN */
        if (!any && none_words) {
            Py_ssize_t pat = 0;
            for (Py_ssize_t a = 0; a < A; a++) pat |= (Py_ssize_t)(d_out[i * A + a] != 0) << a;
            memcpy(words + i * W, none_words + pat * W, sizeof(uint64_t) * W);
            continue;
        }
        /* the detection's largest IoU: a threshold above it matches nothing (where no IoU is NaN, which the
         * scan below would take) */
        double imax = -1.0;
        int nan_iou = 0;
        for (Py_ssize_t g = 0; g < ng; g++) {
            if (iou[g] != iou[g]) nan_iou = 1;
            else if (iou[g] > imax) imax = iou[g];
        }
        for (Py_ssize_t a = 0; a < A; a++) {
            int out = d_out[i * A + a] != 0;
            for (Py_ssize_t t = 0; t < T; t++) {
                uint8_t *tk = taken + (a * T + t) * ng;
                Py_ssize_t m = -1;
                double best = thr[t];
                int m_ig = 0;
                /* non-ignored first (the largest IoU, the last on ties), else the ignored ones */
                for (int pass = nan_iou || !(imax < thr[t]) ? 0 : 2; pass < 2 && m < 0; pass++) {
                    best = thr[t];
                    for (Py_ssize_t g = 0; g < ng; g++) {
                        Py_ssize_t gg = glo + g;
                        int ig = (g_ig[gg] >> a) & 1;
                        if (ig != pass) continue;
                        if (tk[g] && !g_crowd[gg]) continue;
                        if (iou[g] < best) continue;
                        best = iou[g];
                        m = g;
                        m_ig = ig;
                    }
                }
                int state;
                if (m >= 0) {
                    tk[m] = 1;
                    int effective = g_idnz[glo + m] != 0;
                    int ignored = m_ig || (!effective && out);
                    state = ignored ? ST_IGNORED : (effective ? ST_TP : ST_FP);
                } else {
                    state = out ? ST_IGNORED : ST_FP;
                }
                st[a * T + t] = (int8_t)state;
            }
        }
        uint64_t *wr = words + i * W;
        for (Py_ssize_t r = 0; r < rows; r++) wr[r / TRITS] += (uint64_t)st[r] * POW3[r % TRITS];
    }
    Py_END_ALLOW_THREADS
done:
    free(iou); free(taken); free(st); free(none_words);
    PyBuffer_Release(&bdk); PyBuffer_Release(&bdb); PyBuffer_Release(&bgk); PyBuffer_Release(&bgb);
    PyBuffer_Release(&bgc); PyBuffer_Release(&bgi); PyBuffer_Release(&bgz); PyBuffer_Release(&bdo);
    PyBuffer_Release(&bth); PyBuffer_Release(&bw);
    if (have_iou) PyBuffer_Release(&biou);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromSsize_t(pairs);
}

/* a before b in numpy's np.lexsort((place, -score, key)): key ascending, then score descending (NaN last, as
 * -NaN sorts), then place (the caller's stable merge keeps that) */
static inline int group_before(const int64_t *key, const double *score, int64_t a, int64_t b) {
    if (key[a] != key[b]) return key[a] < key[b];
    double sa = score[a], sb = score[b];
    int na = isnan(sa), nb = isnan(sb);
    if (na || nb) return !na && nb;
    return sa > sb;
}

/* a[lo:hi) sorted stably by group_before: a bottom-up merge sort through b[lo:hi) (the result in a) */
static void merge_sort_range(const int64_t *key, const double *score, int64_t *a, int64_t *b, Py_ssize_t lo,
                             Py_ssize_t hi) {
    int64_t *src = a, *dst = b;
    for (Py_ssize_t w = 1; w < hi - lo; w *= 2) {
        for (Py_ssize_t s0 = lo; s0 < hi; s0 += 2 * w) {
            Py_ssize_t mid = s0 + w < hi ? s0 + w : hi, e = s0 + 2 * w < hi ? s0 + 2 * w : hi;
            Py_ssize_t i = s0, j = mid, o = s0;
            while (i < mid && j < e) dst[o++] = group_before(key, score, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < e) dst[o++] = src[j++];
        }
        int64_t *t = src; src = dst; dst = t;
    }
    if (src != a) memcpy(a + lo, src + lo, sizeof(int64_t) * (size_t)(hi - lo));
}

/* kept(d_key i8[n], score f8[n], max_det, out i8[n] (out)) -> k
 * The detections in np.lexsort((arange(n), -score, d_key)) order, then the first max_det of each run of equal
 * d_key: out[:k]. Where the keys span at most 4n + 65536 values (an add() slice's images times the
 * categories), a stable counting sort by key and then each key's few detections by score (insertion, stable;
 * a merge sort past 32); else one stable merge sort of them all. */
static PyObject *py_kept(PyObject *self, PyObject *args) {
    Py_buffer bk, bs, bo;
    Py_ssize_t max_det;
    if (!PyArg_ParseTuple(args, "y*y*nw*", &bk, &bs, &max_det, &bo)) return NULL;
    const int64_t *key = bk.buf;
    const double *score = bs.buf;
    int64_t *out = bo.buf;
    Py_ssize_t n = bk.len / 8, k = 0;
    int64_t kmin = 0, kmax = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i == 0 || key[i] < kmin) kmin = key[i];
        if (i == 0 || key[i] > kmax) kmax = key[i];
    }
    /* the keys' span, without overflow: counted where it is small */
    int counting = n > 0 && (uint64_t)kmax - (uint64_t)kmin < (uint64_t)(4 * n + 65536);
    Py_ssize_t span = counting ? (Py_ssize_t)((uint64_t)kmax - (uint64_t)kmin) + 1 : 0;
    int64_t *a = malloc(sizeof(int64_t) * (n ? n : 1)), *b = malloc(sizeof(int64_t) * (n ? n : 1));
    Py_ssize_t *at = counting ? calloc((size_t)span + 1, sizeof(Py_ssize_t)) : NULL;
    if (!a || !b || (counting && !at)) {
        free(a); free(b); free(at);
        PyBuffer_Release(&bk); PyBuffer_Release(&bs); PyBuffer_Release(&bo);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    if (counting) {
        for (Py_ssize_t i = 0; i < n; i++) at[key[i] - kmin + 1]++;
        for (Py_ssize_t v = 0; v < span; v++) at[v + 1] += at[v];
        for (Py_ssize_t i = 0; i < n; i++) a[at[key[i] - kmin]++] = i;  /* by key, places rising */
        for (Py_ssize_t lo = 0; lo < n;) {
            Py_ssize_t hi = lo + 1;
            while (hi < n && key[a[hi]] == key[a[lo]]) hi++;
            if (hi - lo > 32) {
                merge_sort_range(key, score, a, b, lo, hi);
            } else {
                for (Py_ssize_t i = lo + 1; i < hi; i++) {  /* insertion: an equal score stays after */
                    int64_t x = a[i];
                    Py_ssize_t j = i;
                    while (j > lo && group_before(key, score, x, a[j - 1])) {
                        a[j] = a[j - 1];
                        j--;
                    }
                    a[j] = x;
                }
            }
            lo = hi;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) a[i] = i;
        merge_sort_range(key, score, a, b, 0, n);
    }
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        run = (i > 0 && key[a[i]] == key[a[i - 1]]) ? run + 1 : 0;
        if (run < max_det) out[k++] = a[i];
    }
    Py_END_ALLOW_THREADS
    free(a); free(b); free(at);
    PyBuffer_Release(&bk); PyBuffer_Release(&bs); PyBuffer_Release(&bo);
    return PyLong_FromSsize_t(k);
}

/* ---- accumulation ---------------------------------------------------------------------------- */

/* the largest of cur and n doubles (none NaN), four running maxima at a time: max is exact, so any order gives
 * the same value */
static inline double max_of(const double *p, Py_ssize_t n, double cur) {
    double m0 = cur, m1 = cur, m2 = cur, m3 = cur;
    Py_ssize_t j = 0;
    for (; j + 4 <= n; j += 4) {
        m0 = p[j] > m0 ? p[j] : m0;
        m1 = p[j + 1] > m1 ? p[j + 1] : m1;
        m2 = p[j + 2] > m2 ? p[j + 2] : m2;
        m3 = p[j + 3] > m3 ? p[j + 3] : m3;
    }
    for (; j < n; j++) m0 = p[j] > m0 ? p[j] : m0;
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    return m2 > m0 ? m2 : m0;
}

#define WORD_CACHE_BITS 8  /* the bitmask pass's cache of decoded state words: 256 entries */
#define NEED_CACHE 64  /* the recall points' needs kept for this many ground-truth counts (by count % 64) */

/* word ww's (of a detection's W <= 2) 40 states as two masks of their rows, ORed into tm (true positives) and
 * fm (false positives): 20 trits as 8 + 8 + 4, a TF8 look-up each, both masks' bits at once */
static inline void word_masks(uint64_t acc, int ww, uint64_t *tm, uint64_t *fm) {
    uint32_t half[2] = {(uint32_t)(acc % 3486784401ULL), (uint32_t)(acc / 3486784401ULL)};
    for (int hh = 0; hh < 2; hh++) {
        uint32_t v = half[hh], v1 = v / 6561;
        int sh = ww * TRITS + hh * 20;  /* 0, 20, 40 or 60: rows <= 64 */
        uint32_t a0 = TF8[v - v1 * 6561], a1 = TF8[v1 % 6561], a2 = TF8[v1 / 6561];
        uint64_t t = (a0 & 0xFF) | (a1 & 0xFF) << 8 | (a2 & 0xFF) << 16;
        uint64_t f = a0 >> 8 | (a1 >> 8) << 8 | (a2 >> 8) << 16;
        if (sh < 64) { *tm |= t << sh; *fm |= f << sh; }
    }
}

/* accumulate(order i4[n], within i4[n], bounds i8[K+1], words u8[n*W], npig i8[K*A], rec_thrs f8[R],
 *            n_thr, max_dets i8[M], cols i8[P], psum f8[T*K*A*P] (out), tps i4[T*K*A*M] (out),
 *            q_all f8[K*T*R] (out) or None)
 * psum: 0 where not live; tps: -1 there; q_all: each category's interpolated precision at area 'all' and
 * the last maxDet (classwise AP). rec_thrs must rise (pycocotools' 101 points do). */
static PyObject *py_accumulate(PyObject *self, PyObject *args) {
    Py_buffer bo, bwi, bb, bw, bc, bl, bm, bcol, bp, bt, bq;  /* bc: npig, bl: recall thresholds */
    PyObject *q_obj;
    int n_thr;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*iy*y*w*w*O", &bo, &bwi, &bb, &bw, &bc, &bl, &n_thr, &bm, &bcol, &bp,
                          &bt, &q_obj))
        return NULL;
    int have_q = q_obj != Py_None;
    if (have_q && PyObject_GetBuffer(q_obj, &bq, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        have_q = -1;
    }
    const int32_t *order = bo.buf, *within = bwi.buf;
    const int64_t *bounds = bb.buf, *npig = bc.buf, *max_dets = bm.buf, *cols = bcol.buf;
    const uint64_t *words = bw.buf;
    const double *rec = bl.buf;
    double *psum = bp.buf;
    int32_t *tps = bt.buf;
    double *q_all = have_q == 1 ? (double *)bq.buf : NULL;
    Py_ssize_t K = bb.len / 8 - 1, M = bm.len / 8, P = bcol.len / 8, T = n_thr;
    Py_ssize_t A = K ? bc.len / 8 / K : 0, R = bl.len / 8;
    int64_t cmk[NEED_CACHE], *cmc = NULL;  /* the needs' cache: counts and their R needs */
    Py_ssize_t rows = A * T, W = (rows + TRITS - 1) / TRITS;
    Py_ssize_t nmax = 0;
    uint8_t *st = NULL;
    double *pr = NULL, *q = NULL;
    int64_t *pcol = NULL;
    uint8_t *m0 = NULL;
    uint64_t *tpb = NULL, *fpb = NULL, *leb = NULL;  /* the bitmask pass's rows (see below) */
    Py_ssize_t nw = 0;
    if (have_q < 0) goto done;
    for (Py_ssize_t rr = 1; rr < R; rr++)
        if (!(rec[rr] >= rec[rr - 1])) {  /* the envelope's reading below relies on it */
            PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.accumulate: the recall points must rise");
            goto done;
        }
    cmc = malloc(sizeof(int64_t) * NEED_CACHE * (size_t)(R ? R : 1));
    if (!cmc) { PyErr_NoMemory(); goto done; }
    for (int x = 0; x < NEED_CACHE; x++) cmk[x] = -1;
    for (Py_ssize_t k = 0; k < K; k++)
        if (bounds[k + 1] - bounds[k] > nmax) nmax = bounds[k + 1] - bounds[k];
    nw = (nmax + 63) / 64;  /* 64-detection blocks of the largest category */
    st = malloc((size_t)(nmax ? nmax : 1) * rows);
    nmax += 1;  /* a slot past the last true positive (the branchless pass writes there) */
    pr = malloc(sizeof(double) * (size_t)nmax * (P ? P : 1));
    q = malloc(sizeof(double) * (R ? R : 1));
    pcol = malloc(sizeof(int64_t) * (M ? M : 1) * 3);
    m0 = malloc((size_t)(nmax ? nmax : 1));
    if (!st || !pr || !q || !pcol || !m0) { PyErr_NoMemory(); goto done; }
    if (M > 255) { PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.accumulate: more than 255 maxDets"); goto done; }
    for (Py_ssize_t m = 1; m < M; m++)
        if (max_dets[m] < max_dets[m - 1]) {
            PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.accumulate: maxDets must rise");
            goto done;
        }
    int64_t *ntp = pcol + M, *nfp = pcol + 2 * M;
    int last_only = M > 0;
    for (Py_ssize_t m = 0; m < M; m++) {
        pcol[m] = -1;
        for (Py_ssize_t c = 0; c < P; c++) if (cols[c] == m) pcol[m] = c;
        if (m < M - 1 && pcol[m] >= 0) last_only = 0;
    }
    if (M > 0 && pcol[M - 1] < 0) last_only = 0;
    /* the bitmask pass (only the largest maxDet's precision read, at most 64 rows): per row, a bit per ranked
     * detection for its true positives (tpb) and false positives (fpb), and per smaller maxDet m a bit for the
     * detections it keeps (leb); a row's true positives are then visited bit by bit and the false positives
     * before each counted by popcount -- the very counts (and floats) of the byte-per-state pass */
    int bits = last_only && rows <= 64;
    if (bits) {
        tpb = malloc(sizeof(uint64_t) * (size_t)(nw ? nw : 1) * (size_t)rows);
        fpb = malloc(sizeof(uint64_t) * (size_t)(nw ? nw : 1) * (size_t)rows);
        leb = malloc(sizeof(uint64_t) * (size_t)(nw ? nw : 1) * (size_t)M);
        if (!tpb || !fpb || !leb) { PyErr_NoMemory(); goto done; }
    }
    int64_t by_m0[257];
    /* the bitmask pass's decoded words: a direct-mapped cache (a category's detections hold a few hundred
     * distinct words, most of them a few: the decoding becomes a look-up). Every entry starts as word 0,
     * whose masks are 0 -- right for any word that lands there */
    uint64_t ck[1 << WORD_CACHE_BITS], ct[1 << WORD_CACHE_BITS], cf[1 << WORD_CACHE_BITS];
    memset(ck, 0, sizeof ck);
    memset(ct, 0, sizeof ct);
    memset(cf, 0, sizeof cf);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t x = 0; x < T * K * A * P; x++) psum[x] = 0.0;
    for (Py_ssize_t x = 0; x < T * K * A * M; x++) tps[x] = -1;
    for (Py_ssize_t k = 0; k < K; k++) {
        int any = 0;
        for (Py_ssize_t a = 0; a < A; a++) any |= npig[k * A + a] > 0;
        if (!any) continue;
        Py_ssize_t lo = bounds[k], nk = bounds[k + 1] - lo;
        Py_ssize_t nwk = (nk + 63) / 64;
        Py_ssize_t m_all = M;
        if (bits) {
            /* each detection's states as two masks of its rows (eight trits a look-up), 64 detections
             * transposed at a time into the rows' bits: tpb[r * nwk + block], bit j % 64 */
            uint64_t tb[64], fb[64], lb[256];
            m_all = 0;  /* the first maxDet keeping every detection the largest keeps: the most m0 seen below M */
            uint64_t row_mask = rows == 64 ? UINT64_MAX : ((1ULL << rows) - 1);
            for (Py_ssize_t blk = 0; blk < nwk; blk++) {
                Py_ssize_t j0 = blk * 64, j1 = j0 + 64 < nk ? j0 + 64 : nk;
                for (Py_ssize_t m = 0; m < M; m++) lb[m] = 0;
                for (Py_ssize_t j = j0; j < j1; j++) {
                    Py_ssize_t d = order[lo + j];
                    if (j + AHEAD < nk) {  /* the ranked order reads them from all over: fetched ahead */
                        Py_ssize_t da = order[lo + j + AHEAD];
                        PREFETCH(words + da * W);
                        PREFETCH(within + da);
                    }
                    const uint64_t *w = words + d * W;
                    int32_t w0 = within[d];
                    uint8_t mm = 0;
                    while (mm < M && w0 >= max_dets[mm]) mm++;
                    uint64_t tm = 0, fm = 0;
                    if (mm < M) {
                        if (W == 1) {
                            uint64_t acc = w[0];
                            unsigned h = (unsigned)((acc * 0x9E3779B97F4A7C15ULL) >> (64 - WORD_CACHE_BITS));
                            if (ck[h] == acc) {
                                tm = ct[h];
                                fm = cf[h];
                            } else {
                                word_masks(acc, 0, &tm, &fm);
                                ck[h] = acc;
                                ct[h] = tm;
                                cf[h] = fm;
                            }
                        } else {
                            for (Py_ssize_t ww = 0; ww < W; ww++) word_masks(w[ww], (int)ww, &tm, &fm);
                        }
                        for (Py_ssize_t m = mm; m < M; m++) lb[m] |= 1ULL << (j - j0);
                        if (mm > m_all) m_all = mm;
                    }
                    tb[j - j0] = tm & row_mask;
                    fb[j - j0] = fm & row_mask;
                }
                for (Py_ssize_t j = j1 - j0; j < 64; j++) tb[j] = fb[j] = 0;
                transpose64x2(tb, fb);
                for (Py_ssize_t r = 0; r < rows; r++) {
                    tpb[r * nwk + blk] = tb[r];
                    fpb[r * nwk + blk] = fb[r];
                }
                for (Py_ssize_t m = 0; m < M; m++) leb[m * nwk + blk] = lb[m];
            }
        } else
        /* decode the category's states row by row: st[r * nk + j] (3**20 < 2**32: two 32-bit halves) */
        for (Py_ssize_t j = 0; j < nk; j++) {
            Py_ssize_t d = order[lo + j];
            if (j + AHEAD < nk) {
                Py_ssize_t da = order[lo + j + AHEAD];
                PREFETCH(words + da * W);
                PREFETCH(within + da);
            }
            const uint64_t *w = words + d * W;
            int32_t w0 = within[d];
            uint8_t mm = 0;
            while (mm < M && w0 >= max_dets[mm]) mm++;  /* maxDets rise (the caller sorts them) */
            m0[j] = mm;
            for (Py_ssize_t ww = 0; ww < W; ww++) {
                uint64_t acc = w[ww];
                uint32_t half[2] = {(uint32_t)(acc % 3486784401ULL), (uint32_t)(acc / 3486784401ULL)};
                Py_ssize_t r0 = ww * TRITS;
                for (int hh = 0; hh < 2; hh++) {
                    uint32_t v = half[hh];
                    Py_ssize_t rb = r0 + hh * 20, re = rb + 20 < rows ? rb + 20 : rows;
                    for (Py_ssize_t r = rb; r < re; r += 5) {  /* five trits a table look-up */
                        const uint8_t *five = TRITS5[v % 243];
                        v /= 243;
                        Py_ssize_t e = r + 5 < re ? r + 5 : re;
                        for (Py_ssize_t x = r; x < e; x++) st[x * nk + j] = five[x - r];
                    }
                }
            }
        }
        for (Py_ssize_t a = 0; a < A; a++) {
            int64_t ng = npig[k * A + a];
            if (ng <= 0) continue;  /* no ground truth in this area range: -1 and 0, as set */
            /* the fewest true positives c with c / npig >= r (coco_accumulate._fewest_tps, the same floats);
             * they follow from npig alone: kept for the last few counts seen (many categories share one) */
            int slot = (int)(ng % NEED_CACHE);
            int64_t *cm = cmc + (size_t)slot * (size_t)R;
            if (cmk[slot] != ng) {
                cmk[slot] = ng;
                for (Py_ssize_t rr = 0; rr < R; rr++) {
                    int64_t c = (int64_t)ceil(rec[rr] * (double)ng);
                    if ((double)c / (double)ng < rec[rr]) c++;
                    if (c > 0 && (double)(c - 1) / (double)ng >= rec[rr]) c--;
                    cm[rr] = c;
                }
            }
            for (Py_ssize_t t = 0; t < T; t++) {
                const uint8_t *srow = st + (a * T + t) * nk;
                for (Py_ssize_t m = 0; m < M; m++) ntp[m] = nfp[m] = 0;
                if (bits) {
                    const uint64_t *trow = tpb + (a * T + t) * nwk, *frow = fpb + (a * T + t) * nwk;
                    int64_t tp = 0, fp = 0;
                    double *p = pr + pcol[M - 1] * nmax;
                    for (Py_ssize_t blk = 0; blk < nwk; blk++) {
                        uint64_t tw = trow[blk], fw = frow[blk];
                        while (tw) {
                            int b = ctz64(tw);
                            tw &= tw - 1;
                            tp++;
                            double d = (double)(fp + popcount64(fw & ((1ULL << b) - 1)));
                            d += (double)tp;
                            d += DBL_EPSILON;
                            p[tp - 1] = (double)tp / d;
                        }
                        fp += popcount64(fw);
                    }
                    /* a maxDet keeping every detection the largest keeps has the row's true positives: counted
                     * only for the ones below the first keeping them all (m_all) */
                    for (Py_ssize_t m = 0; m < M; m++) {
                        int64_t c = tp;
                        const uint64_t *keep = leb + m * nwk;
                        if (m < m_all) {
                            c = 0;
                            for (Py_ssize_t blk = 0; blk < nwk; blk++) c += popcount64(trow[blk] & keep[blk]);
                        }
                        ntp[m] = c;
                    }
                } else if (last_only) {
                    /* only the largest maxDet's precision is read: one pass, the smaller maxDets'
                     * true positives counted by the first maxDet keeping each detection */
                    int64_t tp = 0, fp = 0;
                    double *p = pr + pcol[M - 1] * nmax;
                    for (Py_ssize_t m = 0; m <= M; m++) by_m0[m] = 0;
                    for (Py_ssize_t j = 0; j < nk; j++) {
                        uint8_t s = srow[j], mj = m0[j];
                        if (s == ST_TP && mj < M) {  /* true positives are the rare case: predicted branches */
                            tp++;
                            by_m0[mj]++;
                            double d = (double)fp;
                            d += (double)tp;
                            d += DBL_EPSILON;
                            p[tp - 1] = (double)tp / d;
                        } else {
                            fp += (s == ST_FP) & (mj < M);
                        }
                    }
                    int64_t run = 0;
                    for (Py_ssize_t m = 0; m < M; m++) { run += by_m0[m]; ntp[m] = run; }
                } else for (Py_ssize_t j = 0; j < nk; j++) {
                    uint8_t s = srow[j];
                    if (s == ST_IGNORED) continue;
                    Py_ssize_t m = m0[j];  /* the maxDets keeping this detection: m0[j] .. M-1 */
                    if (s == ST_TP) {
                        for (; m < M; m++) {
                            int64_t n1 = ++ntp[m];
                            if (pcol[m] >= 0) {
                                double d = (double)nfp[m];
                                d += (double)n1;
                                d += DBL_EPSILON;
                                pr[pcol[m] * nmax + n1 - 1] = (double)n1 / d;
                            }
                        }
                    } else {
                        for (; m < M; m++) nfp[m]++;
                    }
                }
                for (Py_ssize_t m = 0; m < M; m++) {
                    Py_ssize_t c = pcol[m];
                    int64_t n_tp = ntp[m];
                    tps[((t * K + k) * A + a) * M + m] = (int32_t)n_tp;
                    if (c < 0) continue;
                    double *p = pr + c * nmax;
                    /* the envelope read at each recall point: the most precision of the true positives from
                     * the first one reaching it on -- from the last recall point down, each point's maximum
                     * that of the positions since the point above (the recall points' needs rise) and the
                     * point above's */
                    int keep_q = q_all && a == 0 && m == M - 1;
                    if (n_tp == 0) {  /* every point unreached: 0 (their sum too, as set) */
                        if (keep_q) memset(q_all + (k * T + t) * R, 0, sizeof(double) * R);
                        continue;
                    }
                    double cur = 0.0;  /* a precision is > 0 */
                    Py_ssize_t hi = (Py_ssize_t)n_tp, rr = R - 1;
                    for (; rr >= 0 && cm[rr] > n_tp; rr--) q[rr] = 0.0;  /* the points not reached */
                    for (; rr >= 0; rr--) {
                        int64_t need = cm[rr];
                        Py_ssize_t from = need > 0 ? (Py_ssize_t)need - 1 : 0;
                        if (from < hi) {
                            cur = max_of(p + from, hi - from, cur);
                            hi = from;
                        }
                        q[rr] = cur;
                    }
                    psum[((t * K + k) * A + a) * P + c] = pairwise_sum(q, R);
                    if (keep_q) memcpy(q_all + (k * T + t) * R, q, sizeof(double) * R);
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
done:
    free(st); free(pr); free(q); free(pcol); free(m0); free(tpb); free(fpb); free(leb); free(cmc);
    PyBuffer_Release(&bo); PyBuffer_Release(&bwi); PyBuffer_Release(&bb); PyBuffer_Release(&bw);
    PyBuffer_Release(&bc); PyBuffer_Release(&bl); PyBuffer_Release(&bm); PyBuffer_Release(&bcol);
    PyBuffer_Release(&bp); PyBuffer_Release(&bt);
    if (have_q == 1) PyBuffer_Release(&bq);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* ---- ranking --------------------------------------------------------------------------------- */

/* a score as an unsigned key rising with -score: NaN last (as numpy sorts), -0.0 the same as 0.0 */
static inline uint64_t neg_score_key(double x) {
    if (x != x) return UINT64_MAX;
    double y = -x;
    if (y == 0.0) y = 0.0;
    uint64_t b;
    memcpy(&b, &y, 8);
    return (b >> 63) ? ~b : b | 0x8000000000000000ULL;
}

/* the same for a float32 score, in 32 bits (the same order as its double's key: float -> double is exact and
 * monotonic): the radix sort then skips the upper passes, where every key's digits are 0 */
static inline uint64_t neg_score_key32(float x) {
    if (x != x) return UINT32_MAX;
    float y = -x;
    if (y == 0.0f) y = 0.0f;
    uint32_t b;
    memcpy(&b, &y, 4);
    return (b >> 31) ? (uint32_t)~b : b | 0x80000000u;
}

/* ranked(scores f4/f8[n], cat u1/u2/i4/i8[n], cat itemsize, det_lens i8[images], bounds i8[K+1], order i4[n] (out),
 *        within i4[n] (out)); score_size 4 or 8 */
#define CAT(i) (cs == 1 ? (int64_t)((const uint8_t *)cb)[i] : cs == 2 ? (int64_t)((const uint16_t *)cb)[i] \
                : cs == 4 ? (int64_t)((const int32_t *)cb)[i] : ((const int64_t *)cb)[i])
static PyObject *py_ranked(PyObject *self, PyObject *args) {
    Py_buffer bs, bc, bl, bb, bo, bw;
    int ss, cs;
    if (!PyArg_ParseTuple(args, "y*iy*iy*y*w*w*", &bs, &ss, &bc, &cs, &bl, &bb, &bo, &bw)) return NULL;
    const void *cb = bc.buf;
    const int64_t *lens = bl.buf, *bounds = bb.buf;
    int32_t *order = bo.buf, *within = bw.buf;
    Py_ssize_t n = bs.len / ss, n_img = bl.len / 8, K = bb.len / 8 - 1;
    Py_ssize_t max_m = 1;  /* the most detections of one category */
    for (Py_ssize_t k = 0; k < K; k++)
        if (bounds[k + 1] - bounds[k] > max_m) max_m = bounds[k + 1] - bounds[k];
    /* float32: n keys and one category's second keys and places; float64: 2n keys and places */
    int64_t *fill = malloc(sizeof(int64_t) * (K ? K : 1));
    uint64_t *key = malloc(ss == 4 ? sizeof(uint32_t) * ((n ? n : 1) + max_m) : sizeof(uint64_t) * (n ? n : 1) * 2);
    int32_t *idx = malloc(sizeof(int32_t) * (ss == 4 ? max_m : (n ? n : 1) * 2));
    Py_ssize_t *hist = malloc(sizeof(Py_ssize_t) * 65536);
    if (!fill || !key || !idx || !hist) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    if (ss == 4) {
        /* float32 scores: a stable counting sort by category first (each detection's 32-bit -score key and
         * place written to its category's next slot: the scores read in order), then within each category (a
         * few thousand detections: in cache) a stable LSD radix sort by that key, 11 bits a pass (passes where
         * the category's keys all agree skipped), ping-ponging between the order itself and one category's
         * scratch -- the same unique order as below */
        uint32_t *q0 = (uint32_t *)key, *qs = q0 + n;
        const float *sc = (const float *)bs.buf;
        for (Py_ssize_t k = 0; k < K; k++) fill[k] = bounds[k];
        for (Py_ssize_t j = 0; j < n; j++) {
            int64_t t = fill[CAT(j)]++;
            q0[t] = (uint32_t)neg_score_key32(sc[j]);
            order[t] = (int32_t)j;
        }
        for (Py_ssize_t k = 0; k < K; k++) {
            Py_ssize_t lo = bounds[k], m = bounds[k + 1] - lo;
            uint32_t *ka = q0 + lo, *kb = qs, all_or = 0, all_and = UINT32_MAX;
            int32_t *ia = order + lo, *ib = idx;
            for (Py_ssize_t j = 0; j < m; j++) {
                all_or |= ka[j];
                all_and &= ka[j];
            }
            /* 11-bit digits (three passes), 8-bit ones (four passes of a 256-bucket histogram) for a small
             * category, where clearing and summing 2048 buckets would cost more than its detections */
            int bits = m < 768 ? 8 : 11;
            uint32_t dmask = (1u << bits) - 1;
            for (int shift = 0; shift < 32 && m > 1; shift += bits) {
                if ((((all_or ^ all_and) >> shift) & dmask) == 0) continue;
                memset(hist, 0, sizeof(Py_ssize_t) * ((size_t)dmask + 1));
                for (Py_ssize_t j = 0; j < m; j++) hist[(ka[j] >> shift) & dmask]++;
                Py_ssize_t sum = 0;
                for (uint32_t d = 0; d <= dmask; d++) { Py_ssize_t c = hist[d]; hist[d] = sum; sum += c; }
                for (Py_ssize_t j = 0; j < m; j++) {
                    Py_ssize_t to = hist[(ka[j] >> shift) & dmask]++;
                    kb[to] = ka[j];
                    ib[to] = ia[j];
                }
                uint32_t *kt = ka; ka = kb; kb = kt;
                int32_t *it = ia; ia = ib; ib = it;
            }
            if (ia != order + lo) memcpy(order + lo, ia, sizeof(int32_t) * m);  /* an odd number of passes */
        }
    } else {
        /* float64 scores: a stable LSD radix sort by the score key (16 bits a pass, passes where every key agrees skipped), then a
         * stable counting sort by category: by category, -score, then place -- a stable sort's unique order */
        uint64_t *k0 = key, *k1 = key + n;
        int32_t *i0 = idx, *i1 = idx + n;
        uint64_t all_or = 0, all_and = UINT64_MAX;
        for (Py_ssize_t i = 0; i < n; i++) {
            k0[i] = neg_score_key(((const double *)bs.buf)[i]);  /* float64 scores (float32's take the branch above) */
            i0[i] = (int32_t)i;
            all_or |= k0[i];
            all_and &= k0[i];
        }
        for (int shift = 0; shift < 64; shift += 16) {
            if ((((all_or ^ all_and) >> shift) & 0xFFFF) == 0) continue;  /* every key has this digit */
            memset(hist, 0, sizeof(Py_ssize_t) * 65536);
            for (Py_ssize_t i = 0; i < n; i++) hist[(k0[i] >> shift) & 0xFFFF]++;
            Py_ssize_t sum = 0;
            for (int d = 0; d < 65536; d++) { Py_ssize_t c = hist[d]; hist[d] = sum; sum += c; }
            for (Py_ssize_t i = 0; i < n; i++) {
                Py_ssize_t to = hist[(k0[i] >> shift) & 0xFFFF]++;
                k1[to] = k0[i];
                i1[to] = i0[i];
            }
            uint64_t *kt = k0; k0 = k1; k1 = kt;
            int32_t *it = i0; i0 = i1; i1 = it;
        }
        for (Py_ssize_t k = 0; k < K; k++) fill[k] = bounds[k];
        for (Py_ssize_t j = 0; j < n; j++) order[fill[CAT(i0[j])]++] = i0[j];
    }
    /* each detection's distance from its (image, category) run's first detection */
    Py_ssize_t i = 0;
    for (Py_ssize_t im = 0; im < n_img; im++) {
        Py_ssize_t end = i + lens[im], first = i;
        for (; i < end; i++) {
            if (i > first && CAT(i) != CAT(i - 1)) first = i;
            within[i] = (int32_t)(i - first);
        }
    }
    Py_END_ALLOW_THREADS
done:
    free(fill); free(key); free(idx); free(hist);
    PyBuffer_Release(&bs); PyBuffer_Release(&bc); PyBuffer_Release(&bl); PyBuffer_Release(&bb);
    PyBuffer_Release(&bo); PyBuffer_Release(&bw);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* ---- masks: pycocotools' compressed RLE, area and IoU ---------------------------------------- */

/* rle_decode(strings bytes, offsets i8[n+1], runs u4[len(strings)] (out), run_offsets i8[n+1] (out), area f8[n] (out))
 * pycocotools' rleFrString (its quirk included: a delta from the run two back only past the third run) and
 * rleArea (the sum of the odd runs, a uint). Returns the number of runs written. */
/* One compressed RLE string as pycocotools' rleFrString reads it (up to a NUL) into runs; its rleArea. */
static Py_ssize_t decode_one(const char *str, Py_ssize_t end, uint32_t *runs, double *area) {
    Py_ssize_t p = 0, m = 0;
    while (p < end && str[p]) {
        long x = 0;
        int k = 0, more = 1;
        while (more && p < end) {
            char c = (char)(str[p] - 48);
            x |= (long)(c & 0x1f) << 5 * k;
            more = c & 0x20;
            p++;
            k++;
            if (!more && (c & 0x10)) x |= -1L << 5 * k;
        }
        if (m > 2) x += (long)runs[m - 2];
        runs[m++] = (uint32_t)x;
    }
    uint32_t a = 0;
    for (Py_ssize_t j = 1; j < m; j += 2) a += runs[j];
    *area = (double)a;
    return m;
}

static PyObject *py_rle_decode(PyObject *self, PyObject *args) {
    Py_buffer bs, bo, br, bro, ba;
    if (!PyArg_ParseTuple(args, "y*y*w*w*w*", &bs, &bo, &br, &bro, &ba)) return NULL;
    const char *str = bs.buf;
    const int64_t *off = bo.buf;
    uint32_t *runs = br.buf;
    int64_t *roff = bro.buf;
    double *area = ba.buf;
    Py_ssize_t n = bo.len / 8 - 1, m = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        roff[r] = m;
        m += decode_one(str + off[r], off[r + 1] - off[r], runs + m, &area[r]);
    }
    roff[n] = m;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bs); PyBuffer_Release(&bo); PyBuffer_Release(&br); PyBuffer_Release(&bro); PyBuffer_Release(&ba);
    return PyLong_FromSsize_t(m);
}

static PyObject *KEY_COUNTS, *KEY_SIZE;  /* 'counts', 'size', interned at import */

/* rle_decode_masks(rles list) -> (runs u4 bytes, run_offsets i8[n+1] bytes, area f8[n] bytes, hw i8[n] bytes)
 * rle_decode of a list of RLE dicts (bytes 'counts', 'size' two ints in [0, 2**31)), hw = h * 2**32 + w;
 * None when one is not such a dict. */
static PyObject *py_rle_decode_masks(PyObject *self, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &seq)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(seq), total = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *d = PyList_GET_ITEM(seq, r), *counts, *size;
        if (!PyDict_Check(d) || !(counts = PyDict_GetItem(d, KEY_COUNTS)) || !PyBytes_Check(counts)) Py_RETURN_NONE;
        if (!(size = PyDict_GetItem(d, KEY_SIZE)) || !(PyList_Check(size) || PyTuple_Check(size)) ||
            PySequence_Fast_GET_SIZE(size) != 2)
            Py_RETURN_NONE;
        for (int j = 0; j < 2; j++) {
            PyObject *v = PySequence_Fast_GET_ITEM(size, j);
            int over = 0;
            long long x = PyLong_Check(v) ? PyLong_AsLongLongAndOverflow(v, &over) : -1;
            if (over || x < 0 || x >= (1LL << 31)) Py_RETURN_NONE;
        }
        total += PyBytes_GET_SIZE(counts);
    }
    PyObject *b_runs = PyBytes_FromStringAndSize(NULL, 4 * (total ? total : 1));
    PyObject *b_off = PyBytes_FromStringAndSize(NULL, 8 * (n + 1));
    PyObject *b_area = PyBytes_FromStringAndSize(NULL, 8 * (n ? n : 1));
    PyObject *b_hw = PyBytes_FromStringAndSize(NULL, 8 * (n ? n : 1));
    if (!b_runs || !b_off || !b_area || !b_hw) goto fail;
    uint32_t *runs = (uint32_t *)PyBytes_AS_STRING(b_runs);
    int64_t *roff = (int64_t *)PyBytes_AS_STRING(b_off), *hw = (int64_t *)PyBytes_AS_STRING(b_hw);
    double *area = (double *)PyBytes_AS_STRING(b_area);
    Py_ssize_t m = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *d = PyList_GET_ITEM(seq, r);
        PyObject *counts = PyDict_GetItem(d, KEY_COUNTS), *size = PyDict_GetItem(d, KEY_SIZE);
        long long h = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(size, 0));
        long long w = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(size, 1));
        hw[r] = (int64_t)h * ((int64_t)1 << 32) + (int64_t)w;
        roff[r] = m;
        m += decode_one(PyBytes_AS_STRING(counts), PyBytes_GET_SIZE(counts), runs + m, &area[r]);
    }
    roff[n] = m;
    return Py_BuildValue("(NNNN)", b_runs, b_off, b_area, b_hw);
fail:
    Py_XDECREF(b_runs); Py_XDECREF(b_off); Py_XDECREF(b_area); Py_XDECREF(b_hw);
    return NULL;
}

/* A one-character value of a compressed RLE string (c its character - 48, in 0 .. 31): its five bits, the
 * fifth the sign. */
static inline int64_t one_char_value(int c) { return (int64_t)(c & 0x0f) - (int64_t)(c & 0x10); }

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define RLE_SIXTEEN 1
/* Sixteen one-character values of a compressed RLE string at once (SSE2, x86-64's baseline), past the third
 * run: rle_ok's four-at-a-time step on 16 characters, the same runs, area and checks. 0 (nothing read or
 * written) where one of the 16 is not a one-character value; -1 where a run would be negative or the runs
 * pass hw (rle_ok says nothing then); else 1, the 16 runs written to runs and the state moved on.
 *
 * The values v (in -16 .. 15) become run increments by a prefix sum of stride two (rleFrString's delta from
 * the run two back): y_i = v_i + v_(i-2) + ..., |y| <= 128 in 16-bit lanes; run i is y_i plus the run before
 * the block of its parity (two_back for even i, one_back for odd), so the runs' sum, the odd runs' sum and
 * the least run follow from the lanes' sums and minima per parity, exactly, in 64 bits. */
static inline int rle_sixteen(const unsigned char *str, int64_t *two_back, int64_t *one_back, int64_t *total,
                              uint32_t *area, int odd_first, int64_t hw, uint32_t *runs) {
    __m128i c = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)str), _mm_set1_epi8(48));
    __m128i zero = _mm_setzero_si128();
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(c, _mm_set1_epi8((char)0xE0)), zero)) != 0xFFFF) return 0;
    /* the values: the low four bits less the fifth (the sign) */
    __m128i v = _mm_sub_epi8(_mm_and_si128(c, _mm_set1_epi8(0x0F)), _mm_and_si128(c, _mm_set1_epi8(0x10)));
    __m128i lo = _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8), hi = _mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8);
    lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 4));  /* + the lane two back */
    lo = _mm_add_epi16(lo, _mm_slli_si128(lo, 8));  /* + the lanes four and six back */
    hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 4));
    hi = _mm_add_epi16(hi, _mm_slli_si128(hi, 8));
    hi = _mm_add_epi16(hi, _mm_shuffle_epi32(lo, _MM_SHUFFLE(3, 3, 3, 3)));  /* + lanes 6 and 7 of lo, by parity */
    /* the least increment of each parity: no run may be negative */
    __m128i mn = _mm_min_epi16(lo, hi);
    mn = _mm_min_epi16(mn, _mm_srli_si128(mn, 8));
    mn = _mm_min_epi16(mn, _mm_srli_si128(mn, 4));
    int32_t mins = _mm_cvtsi128_si32(mn);
    int64_t min_even = (int16_t)(mins & 0xFFFF), min_odd = (int16_t)((uint32_t)mins >> 16);
    if (*two_back + min_even < 0 || *one_back + min_odd < 0) return -1;
    /* the increments' sums per parity */
    __m128i even = _mm_set1_epi32(1), odd = _mm_set1_epi32(1 << 16);
    __m128i se = _mm_add_epi32(_mm_madd_epi16(lo, even), _mm_madd_epi16(hi, even));
    __m128i so = _mm_add_epi32(_mm_madd_epi16(lo, odd), _mm_madd_epi16(hi, odd));
    se = _mm_add_epi32(se, _mm_srli_si128(se, 8));
    se = _mm_add_epi32(se, _mm_srli_si128(se, 4));
    so = _mm_add_epi32(so, _mm_srli_si128(so, 8));
    so = _mm_add_epi32(so, _mm_srli_si128(so, 4));
    int64_t sum_even = 8 * *two_back + _mm_cvtsi128_si32(se), sum_odd = 8 * *one_back + _mm_cvtsi128_si32(so);
    *total += sum_even + sum_odd;
    if ((uint64_t)*total > (uint64_t)hw) return -1;
    *area += (uint32_t)(odd_first ? sum_even : sum_odd);  /* the odd runs: even lanes when the block starts odd */
    /* the runs: the increments widened to 32 bits plus the runs before the block (each < 2**32) */
    __m128i base = _mm_set_epi32((int)(uint32_t)*one_back, (int)(uint32_t)*two_back, (int)(uint32_t)*one_back,
                                 (int)(uint32_t)*two_back);
    _mm_storeu_si128((__m128i *)runs, _mm_add_epi32(_mm_srai_epi32(_mm_unpacklo_epi16(lo, lo), 16), base));
    _mm_storeu_si128((__m128i *)(runs + 4), _mm_add_epi32(_mm_srai_epi32(_mm_unpackhi_epi16(lo, lo), 16), base));
    _mm_storeu_si128((__m128i *)(runs + 8), _mm_add_epi32(_mm_srai_epi32(_mm_unpacklo_epi16(hi, hi), 16), base));
    _mm_storeu_si128((__m128i *)(runs + 12), _mm_add_epi32(_mm_srai_epi32(_mm_unpackhi_epi16(hi, hi), 16), base));
    *two_back += (int16_t)_mm_extract_epi16(hi, 6);
    *one_back += (int16_t)_mm_extract_epi16(hi, 7);
    return 1;
}
#endif

/* One compressed RLE string of h * w = hw pixels: 1 and its area (pycocotools' rleArea, a uint32 sum of the
 * odd runs) only where mmeval's check_rle (metrics/utils/rle_check.py) surely passes it -- every character
 * in '0'..'o', the last one not continuing a value, every run (after rleFrString's deltas) >= 0 and the
 * runs summing to hw -- and only values of at most 6 characters and hw < 2**32: there pycocotools' own
 * decoding (its shifts in a 32-bit int, its runs uint32) gives these very runs. 0 says nothing. The runs are
 * written to runs (room for end of them: at most one per character) and their number to n_runs.
 *
 * Nearly every value of a real mask is one character (97 % on the benchmark's masks): two such values are
 * taken at once (four while they last, else two), a branch well predicted; their checks are the sum (at most
 * hw, tested per step of four or two: no overflow; a partial sum past hw or below 0 between two tests needs a
 * negative run) and the sign bits (OR-ed, tested at the end: with every run >= 0 and the sum hw, no partial
 * sum passed hw).
 * A longer value, an odd last character and the first three values (no delta yet) take the general step. */
static int rle_ok(const unsigned char *str, Py_ssize_t end, int64_t hw, double *area, uint32_t *runs, Py_ssize_t *n_runs) {
    int64_t two_back = 0, one_back = 0, total = 0, neg = 0;
    Py_ssize_t p = 0, m = 0;
    uint32_t a = 0;
    if (hw < 0 || hw >= ((int64_t)1 << 32)) return 0;
    while (p < end) {
#ifdef RLE_SIXTEEN
        /* sixteen one-character values at a time while they last */
        while (m >= 3 && p + 16 <= end) {
            int got = rle_sixteen(str + p, &two_back, &one_back, &total, &a, (int)(m & 1), hw, runs + m);
            if (got < 0) return 0;
            if (!got) break;
            m += 16;
            p += 16;
        }
#endif
        /* four one-character values at a time while they last: two pairs' steps, their sum tested once */
        while (m >= 3 && p + 3 < end) {
            int c0 = (int)str[p] - 48, c1 = (int)str[p + 1] - 48, c2 = (int)str[p + 2] - 48, c3 = (int)str[p + 3] - 48;
            if ((unsigned)(c0 | c1 | c2 | c3) >= 32) break;
            int64_t x0 = one_char_value(c0) + two_back;
            int64_t x1 = one_char_value(c1) + one_back;
            int64_t x2 = one_char_value(c2) + x0;
            int64_t x3 = one_char_value(c3) + x1;
            neg |= x0 | x1 | x2 | x3;
            total += (x0 + x1) + (x2 + x3);
            if ((uint64_t)total > (uint64_t)hw) return 0;
            a += (uint32_t)((m & 1) ? x0 + x2 : x1 + x3);  /* the odd runs of the four */
            runs[m] = (uint32_t)x0;
            runs[m + 1] = (uint32_t)x1;
            runs[m + 2] = (uint32_t)x2;
            runs[m + 3] = (uint32_t)x3;
            two_back = x2;
            one_back = x3;
            m += 4;
            p += 4;
        }
        if (p >= end) break;
        if (m >= 3 && p + 1 < end) {
            int c0 = (int)str[p] - 48, c1 = (int)str[p + 1] - 48;
            if ((unsigned)(c0 | c1) < 32) {  /* two one-character values (a negative c sets high bits) */
                int64_t x0 = one_char_value(c0) + two_back;
                int64_t x1 = one_char_value(c1) + one_back;
                neg |= x0 | x1;
                total += x0 + x1;
                if ((uint64_t)total > (uint64_t)hw) return 0;
                a += (uint32_t)((m & 1) ? x0 : x1);  /* the odd run of the two */
                runs[m] = (uint32_t)x0;
                runs[m + 1] = (uint32_t)x1;
                two_back = x0;
                one_back = x1;
                m += 2;
                p += 2;
                continue;
            }
        }
        int c0 = (int)str[p] - 48;
        int64_t x;
        if ((unsigned)c0 < 32) {  /* one character */
            x = one_char_value(c0);
            p++;
        } else {
            int k = 0, more = 1, c = 0;
            x = 0;
            while (more) {
                if (p >= end || k >= 6) return 0;
                c = (int)str[p] - 48;
                if (c < 0 || c > 63) return 0;
                x |= (int64_t)(c & 0x1f) << (5 * k);
                more = c & 0x20;
                p++;
                k++;
            }
            if (c & 0x10) x -= (int64_t)1 << (5 * k);
        }
        if (m > 2) x += two_back;
        if ((uint64_t)x > (uint64_t)(hw - total)) return 0;  /* x < 0, or past the h * w pixels */
        total += x;
        a += (uint32_t)x & (uint32_t)-(int32_t)(m & 1);  /* the odd runs */
        runs[m] = (uint32_t)x;  /* rle_decode's very runs: x < 2**32, no 32-bit overflow below 7 chars */
        two_back = one_back;
        one_back = x;
        m++;
    }
    if (neg < 0 || total != hw) return 0;
    *area = (double)a;
    *n_runs = m;
    return 1;
}

/* A mask's 'counts' as rle_masks takes it: 1 and its characters where it is bytes or an ASCII str (exactly),
 * else 0. */
static int counts_string(PyObject *counts, const char **str, Py_ssize_t *len) {
    if (counts && PyBytes_CheckExact(counts)) {
        *str = PyBytes_AS_STRING(counts);
        *len = PyBytes_GET_SIZE(counts);
        return 1;
    }
    if (counts && PyUnicode_CheckExact(counts) && PyUnicode_IS_ASCII(counts)) {
        *str = (const char *)PyUnicode_DATA(counts);
        *len = PyUnicode_GET_LENGTH(counts);
        return 1;
    }
    return 0;
}

/* rle_masks(masks list or tuple, area f8[n] (out)) -> list of n
 * For each mask that is a dict (exactly) with bytes or ASCII str 'counts' and a 'size' list or tuple of two
 * ints in [0, 2**31) that rle_ok passes: a new dict {'size': [h, w], 'counts': bytes} and its area; for
 * any other mask None (the caller checks that one in Python). One call for a whole list of masks. */
static PyObject *rle_masks_impl(PyObject *args, int with_runs) {
    PyObject *seq;
    Py_buffer ba;
    if (!PyArg_ParseTuple(args, "Ow*", &seq, &ba)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "rle_masks: masks must be a list or a tuple");
    if (!fast) { PyBuffer_Release(&ba); return NULL; }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), n_ok = 0, m_all = 0;
    double *area = ba.buf;
    PyObject *out = PyList_New(n);
    PyObject *b_runs = NULL, *b_off = NULL, *b_hw = NULL;
    uint32_t *runs = NULL;
    int64_t *roff = NULL, *hws = NULL;
    if (!out || ba.len < n * 8) goto fail;
    /* room for the runs: at most one per character of the strings (without with_runs, of the longest: each
     * mask's runs are written over the last one's) */
    Py_ssize_t total = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *m = PySequence_Fast_GET_ITEM(fast, j);
        PyObject *counts = PyDict_CheckExact(m) ? PyDict_GetItem(m, KEY_COUNTS) : NULL;
        const char *str = NULL;
        Py_ssize_t len = 0;
        counts_string(counts, &str, &len);
        total = with_runs ? total + len : (len > total ? len : total);
    }
    b_runs = PyBytes_FromStringAndSize(NULL, 4 * (total ? total : 1));
    if (!b_runs) goto fail;
    runs = (uint32_t *)PyBytes_AS_STRING(b_runs);
    if (with_runs) {
        b_off = PyBytes_FromStringAndSize(NULL, 8 * (n + 1));
        b_hw = PyBytes_FromStringAndSize(NULL, 8 * (n ? n : 1));
        if (!b_off || !b_hw) goto fail;
        roff = (int64_t *)PyBytes_AS_STRING(b_off);
        hws = (int64_t *)PyBytes_AS_STRING(b_hw);
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *m = PySequence_Fast_GET_ITEM(fast, j), *item = Py_None;
        area[j] = 0.0;
        PyObject *counts = PyDict_CheckExact(m) ? PyDict_GetItem(m, KEY_COUNTS) : NULL;
        PyObject *size = PyDict_CheckExact(m) ? PyDict_GetItem(m, KEY_SIZE) : NULL;
        const char *str = NULL;
        Py_ssize_t len = 0;
        counts_string(counts, &str, &len);
        if (str && size && (PyList_CheckExact(size) || PyTuple_CheckExact(size)) && PySequence_Fast_GET_SIZE(size) == 2) {
            PyObject *hv = PySequence_Fast_GET_ITEM(size, 0), *wv = PySequence_Fast_GET_ITEM(size, 1);
            if (PyLong_CheckExact(hv) && PyLong_CheckExact(wv)) {
                int oh = 0, ow = 0;
                long long h = PyLong_AsLongLongAndOverflow(hv, &oh), w = PyLong_AsLongLongAndOverflow(wv, &ow);
                Py_ssize_t m_one = 0;
                if (roff) roff[j] = m_all;
                if (!oh && !ow && h >= 0 && w >= 0 && h < (1LL << 31) && w < (1LL << 31) &&
                    rle_ok((const unsigned char *)str, len, (int64_t)(h * w), &area[j], runs + m_all, &m_one)) {
                    if (with_runs) m_all += m_one;
                    n_ok++;
                    if (hws) hws[j] = (int64_t)h * ((int64_t)1 << 32) + (int64_t)w;
                    PyObject *b = PyBytes_CheckExact(counts) ? (Py_INCREF(counts), counts)
                                                             : PyBytes_FromStringAndSize(str, len);
                    PyObject *hw = b ? PyList_New(2) : NULL;
                    PyObject *d = hw ? PyDict_New() : NULL;
                    if (!d) { Py_XDECREF(b); Py_XDECREF(hw); goto fail; }
                    Py_INCREF(hv); PyList_SET_ITEM(hw, 0, hv);
                    Py_INCREF(wv); PyList_SET_ITEM(hw, 1, wv);
                    int bad = PyDict_SetItem(d, KEY_SIZE, hw) || PyDict_SetItem(d, KEY_COUNTS, b);
                    Py_DECREF(hw); Py_DECREF(b);
                    if (bad) { Py_DECREF(d); goto fail; }
                    item = d;
                }
            }
        }
        if (item == Py_None) Py_INCREF(Py_None);
        PyList_SET_ITEM(out, j, item);
    }
    Py_DECREF(fast);
    PyBuffer_Release(&ba);
    if (!with_runs) { Py_DECREF(b_runs); return out; }
    if (n_ok < n) {  /* not every mask decoded here: no runs */
        Py_DECREF(b_runs); Py_DECREF(b_off); Py_DECREF(b_hw);
        return Py_BuildValue("(NOOO)", out, Py_None, Py_None, Py_None);
    }
    roff[n] = m_all;
    if (_PyBytes_Resize(&b_runs, 4 * m_all) < 0) { Py_DECREF(out); Py_DECREF(b_off); Py_DECREF(b_hw); return NULL; }
    return Py_BuildValue("(NNNN)", out, b_runs, b_off, b_hw);
fail:
    Py_XDECREF(out);
    Py_XDECREF(b_runs); Py_XDECREF(b_off); Py_XDECREF(b_hw);
    Py_DECREF(fast);
    PyBuffer_Release(&ba);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "rle_masks: area must hold a float64 per mask");
    return NULL;
}

static PyObject *py_rle_masks(PyObject *self, PyObject *args) { return rle_masks_impl(args, 0); }

/* rle_masks_runs(masks, area f8[n] (out)) -> (list, runs u4 bytes, run_offsets i8[n+1] bytes, hw i8[n] bytes)
 * rle_masks, and where it passed every mask, their runs as rle_decode_masks gives them (decoded once, here);
 * else the three are None. */
static PyObject *py_rle_masks_runs(PyObject *self, PyObject *args) { return rle_masks_impl(args, 1); }

/* One mask of rle_lists_runs: its counts string and h * w where it is a dict (exactly) with bytes or ASCII str
 * 'counts' and a 'size' list or tuple of two ints in [0, 2**31) -- what rle_masks takes --, else 0. */
static int mask_fields(PyObject *m, const char **str, Py_ssize_t *len, int64_t *h, int64_t *w) {
    if (!PyDict_CheckExact(m)) return 0;
    PyObject *counts = PyDict_GetItem(m, KEY_COUNTS), *size = PyDict_GetItem(m, KEY_SIZE);
    if (!size || !counts_string(counts, str, len)) return 0;
    if (!(PyList_CheckExact(size) || PyTuple_CheckExact(size)) || PySequence_Fast_GET_SIZE(size) != 2) return 0;
    PyObject *hv = PySequence_Fast_GET_ITEM(size, 0), *wv = PySequence_Fast_GET_ITEM(size, 1);
    if (!PyLong_CheckExact(hv) || !PyLong_CheckExact(wv)) return 0;
    int oh = 0, ow = 0;
    long long hh = PyLong_AsLongLongAndOverflow(hv, &oh), ww = PyLong_AsLongLongAndOverflow(wv, &ow);
    if (oh || ow || hh < 0 || ww < 0 || hh >= (1LL << 31) || ww >= (1LL << 31)) return 0;
    *h = hh;
    *w = ww;
    return 1;
}

/* rle_lists_runs(lists) -> None or (runs u4 Block (a pooled buffer, _blocks.h), offsets i8 bytes, area f8 bytes, hw i8 bytes, run_starts i8 bytes)
 * rle_masks_runs of many lists of masks (lists or tuples) in one call, without the dicts: where rle_masks takes
 * every mask of every list, their runs (list l's at run_starts[l] .. run_starts[l + 1]), each list's run offsets
 * from 0 (n_l + 1 of them, list l's from index l + its first mask's), areas and h * 2**32 + w (mask by mask,
 * the lists one after another); None where some mask is not one rle_masks takes (the caller reads those). */
typedef struct { const char *str; Py_ssize_t len; int64_t h, w; } MaskFields;
#define MASKS_AHEAD 4  /* masks ahead whose counts strings rle_lists_runs prefetches (up to 1 KiB each) */

static PyObject *py_rle_lists_runs(PyObject *self, PyObject *args) {
    PyObject *lists;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &lists)) return NULL;
    Py_ssize_t n_lists = PyList_GET_SIZE(lists), n = 0, total = 0;
    for (Py_ssize_t l = 0; l < n_lists; l++) {
        PyObject *seq = PyList_GET_ITEM(lists, l);
        if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) Py_RETURN_NONE;
        n += PySequence_Fast_GET_SIZE(seq);
    }
    MaskFields *f = PyMem_Malloc(sizeof(MaskFields) * (n ? n : 1));
    if (!f) return PyErr_NoMemory();
    Py_ssize_t r = 0;
    for (Py_ssize_t l = 0; l < n_lists; l++) {  /* every mask what rle_masks takes: room for the runs */
        PyObject *seq = PyList_GET_ITEM(lists, l);
        Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t j = 0; j < k; j++, r++) {
            if (!mask_fields(items[j], &f[r].str, &f[r].len, &f[r].h, &f[r].w)) { PyMem_Free(f); Py_RETURN_NONE; }
            total += f[r].len;
        }
    }
    PyObject *b_runs = block_new(4 * (total ? total : 1));  /* pooled: see _blocks.h */
    PyObject *b_off = PyBytes_FromStringAndSize(NULL, 8 * (n + n_lists ? n + n_lists : 1));
    PyObject *b_area = PyBytes_FromStringAndSize(NULL, 8 * (n ? n : 1));
    PyObject *b_hw = PyBytes_FromStringAndSize(NULL, 8 * (n ? n : 1));
    PyObject *b_starts = PyBytes_FromStringAndSize(NULL, 8 * (n_lists + 1));
    if (!b_runs || !b_off || !b_area || !b_hw || !b_starts) goto fail;
    uint32_t *runs = (uint32_t *)block_data(b_runs);
    int64_t *off = (int64_t *)PyBytes_AS_STRING(b_off), *hws = (int64_t *)PyBytes_AS_STRING(b_hw);
    int64_t *starts = (int64_t *)PyBytes_AS_STRING(b_starts);
    double *area = (double *)PyBytes_AS_STRING(b_area);
    Py_ssize_t m_all = 0, o = 0;
    r = 0;
    for (Py_ssize_t l = 0; l < n_lists; l++) {
        Py_ssize_t k = PySequence_Fast_GET_SIZE(PyList_GET_ITEM(lists, l));
        starts[l] = m_all;
        for (Py_ssize_t j = 0; j < k; j++, r++) {
            Py_ssize_t m_one = 0;
            if (r + MASKS_AHEAD < n) {  /* each string is an object of its own, apart: no hardware prefetch */
                const char *next = f[r + MASKS_AHEAD].str;
                for (Py_ssize_t q = 0; q < f[r + MASKS_AHEAD].len && q < 64 * 16; q += 64) PREFETCH(next + q);
            }
            off[o++] = m_all - starts[l];
            if (!rle_ok((const unsigned char *)f[r].str, f[r].len, f[r].h * f[r].w, &area[r], runs + m_all, &m_one)) {
                PyMem_Free(f);
                Py_DECREF(b_runs); Py_DECREF(b_off); Py_DECREF(b_area); Py_DECREF(b_hw); Py_DECREF(b_starts);
                Py_RETURN_NONE;
            }
            m_all += m_one;
            hws[r] = f[r].h * ((int64_t)1 << 32) + f[r].w;
        }
        off[o++] = m_all - starts[l];
    }
    starts[n_lists] = m_all;
    PyMem_Free(f);
    f = NULL;
    block_set_len(b_runs, 4 * m_all);
    return Py_BuildValue("(NNNNN)", b_runs, b_off, b_area, b_hw, b_starts);
fail:
    PyMem_Free(f);
    Py_XDECREF(b_runs); Py_XDECREF(b_off); Py_XDECREF(b_area); Py_XDECREF(b_hw); Py_XDECREF(b_starts);
    return NULL;
}

/* pycocotools' rleIou of one pair, its merge as written there: A (ka runs, area_a) against B (kb runs), crowd:
 * over A's area. Its quirk kept: the merge stops where both masks' next runs are 0 at once. */
static double rle_iou_merge(const uint32_t *A, Py_ssize_t ka, const uint32_t *B, Py_ssize_t kb, double area_a,
                            int crowd) {
    if (ka == 0 || kb == 0) return 0.0;
    uint32_t ca = A[0], cb = B[0], c, i = 0, u = 0, ct = 1;
    Py_ssize_t a = 1, b = 1;
    int va = 0, vb = 0;
    while (ct > 0) {
        c = ca < cb ? ca : cb;
        if (va || vb) { u += c; if (va && vb) i += c; }
        ct = 0;
        ca -= c; if (!ca && a < ka) { ca = A[a++]; va = !va; } ct += ca;
        cb -= c; if (!cb && b < kb) { cb = B[b++]; vb = !vb; } ct += cb;
    }
    if (i == 0) u = 1;
    else if (crowd) u = (uint32_t)area_a;
    return (double)i / (double)u;
}

/* 1 where runs[1..k) holds a 0 (a user's RLE may: pycocotools' own encoding never does). Two runs a 64-bit
 * word, a zero 32-bit half found by the borrow trick (x - 1) & ~x & high bit. */
static int zero_run(const uint32_t *runs, Py_ssize_t k) {
    const uint64_t ones = 0x0000000100000001ULL, highs = 0x8000000080000000ULL;
    uint64_t acc = 0;
    Py_ssize_t j = 1;
    for (; j + 4 <= k; j += 4) {
        uint64_t x, y;
        memcpy(&x, runs + j, 8);
        memcpy(&y, runs + j + 2, 8);
        acc |= ((x - ones) & ~x) | ((y - ones) & ~y);
    }
    int any = (acc & highs) != 0;
    for (; j < k; j++) any |= runs[j] == 0;
    return any;
}

/* rle_iou_merge's value, faster: where one mask has no run of 0 past its first, the merge never stops early
 * and counts the intersection and the union of the two masks' pixels. The intersection then walks their
 * foreground intervals (the odd runs) together, the one that ends first moving on (half the merge's steps,
 * one branch a step); the union is area_a + area_b - intersection: the same integers (all < 2**32). */
static double rle_iou_one(const uint32_t *A, Py_ssize_t ka, const uint32_t *B, Py_ssize_t kb, double area_a,
                          double area_b, int crowd) {
    if (ka < 2 || kb < 2) return 0.0;  /* no foreground run: rleIou's i is 0 */
    /* the merge stops early only where both masks' next runs are 0 at once: both must hold a 0 */
    if (zero_run(A, ka) && zero_run(B, kb)) return rle_iou_merge(A, ka, B, kb, area_a, crowd);
    uint64_t sa = A[0], ea = sa + A[1], sb = B[0], eb = sb + B[1], inter = 0;
    Py_ssize_t a = 1, b = 1;  /* the foreground runs at hand */
    for (;;) {
        uint64_t lo = sa > sb ? sa : sb, hi = ea < eb ? ea : eb;
        inter += hi > lo ? hi - lo : 0;
        if (ea <= eb) {
            if ((a += 2) >= ka) break;  /* no foreground of A left to meet */
            sa = ea + A[a - 1];
            ea = sa + A[a];
        } else {
            if ((b += 2) >= kb) break;
            sb = eb + B[b - 1];
            eb = sb + B[b];
        }
    }
    if (inter == 0) return 0.0;  /* rleIou: i / 1 */
    double u = crowd ? area_a : (double)((uint64_t)area_a + (uint64_t)area_b - inter);
    return (double)inter / u;
}

static PyObject *py_rle_iou_parts(PyObject *self, PyObject *args) {
    PyObject *parts;
    Py_buffer bp, bs, be, bar, ba, bb, bc, bout;
    if (!PyArg_ParseTuple(args, "O!y*y*y*y*y*y*y*w*", &PyList_Type, &parts, &bp, &bs, &be, &bar, &ba, &bb, &bc, &bout))
        return NULL;
    Py_ssize_t n_parts = PyList_GET_SIZE(parts), got = 0, n_masks = bp.len / 8;
    Py_buffer *pb = PyMem_Calloc(n_parts ? n_parts : 1, sizeof(Py_buffer));
    const uint32_t **base = PyMem_Calloc(n_parts ? n_parts : 1, sizeof(uint32_t *));
    PyObject *res = NULL;
    if (!pb || !base) { PyErr_NoMemory(); goto done; }
    for (; got < n_parts; got++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(parts, got), &pb[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
        base[got] = pb[got].buf;
    }
    const int64_t *part = bp.buf, *st = bs.buf, *en = be.buf, *pa = ba.buf, *pq = bb.buf;
    const double *area = bar.buf;
    const uint8_t *crowd = bc.buf;
    double *out = bout.buf;
    Py_ssize_t n = ba.len / 8;
    for (Py_ssize_t m = 0; m < n_masks; m++) {  /* every mask inside its buffer */
        if (part[m] < 0 || part[m] >= n_parts || st[m] < 0 || en[m] < st[m] || en[m] * 4 > pb[part[m]].len) {
            PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.rle_iou_parts: a mask's runs fall outside its part");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t q = 0; q < n; q++) {
        int64_t x = pa[q], y = pq[q];
        out[q] = rle_iou_one(base[part[x]] + st[x], en[x] - st[x], base[part[y]] + st[y], en[y] - st[y], area[x], area[y],
                             crowd[q]);
    }
    Py_END_ALLOW_THREADS
    res = Py_None;
    Py_INCREF(res);
done:
    for (Py_ssize_t j = 0; j < got; j++) PyBuffer_Release(&pb[j]);
    PyMem_Free(pb);
    PyMem_Free(base);
    PyBuffer_Release(&bp); PyBuffer_Release(&bs); PyBuffer_Release(&be); PyBuffer_Release(&bar);
    PyBuffer_Release(&ba); PyBuffer_Release(&bb); PyBuffer_Release(&bc); PyBuffer_Release(&bout);
    return res;
}

static PyObject *py_pairwise_sum(PyObject *self, PyObject *args) {
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "y*", &b)) return NULL;
    double r = pairwise_sum(b.buf, b.len / 8);
    PyBuffer_Release(&b);
    return PyFloat_FromDouble(r);
}

/* ---- summaries: one column of many packed blobs, joined ----------------------------------- */

/* gather(blobs list, offsets i8[n], nbytes i8[n], out (writable, sum(nbytes) bytes))
 * out = blobs[0][offsets[0] : offsets[0] + nbytes[0]] + blobs[1][...] + ...: the bytes of one column of
 * mmeval.core.packed's summaries, copied once (each blob any object with the buffer protocol). */
static PyObject *py_gather(PyObject *self, PyObject *args) {
    PyObject *blobs;
    Py_buffer bo, bn, bout;
    if (!PyArg_ParseTuple(args, "O!y*y*w*", &PyList_Type, &blobs, &bo, &bn, &bout)) return NULL;
    const int64_t *off = bo.buf, *nb = bn.buf;
    Py_ssize_t n = PyList_GET_SIZE(blobs);
    char *out = bout.buf;
    Py_ssize_t at = 0;
    if (bo.len != 8 * n || bn.len != 8 * n) {
        PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.gather: an offset and a length per blob");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *blob = PyList_GET_ITEM(blobs, i);
        const char *src;
        Py_ssize_t len;
        Py_buffer bb;
        int view = 0;
        if (PyBytes_CheckExact(blob)) {
            src = PyBytes_AS_STRING(blob);
            len = PyBytes_GET_SIZE(blob);
        } else {
            if (PyObject_GetBuffer(blob, &bb, PyBUF_C_CONTIGUOUS) < 0) goto done;
            src = bb.buf;
            len = bb.len;
            view = 1;
        }
        int bad = off[i] < 0 || nb[i] < 0 || off[i] > len || nb[i] > len - off[i] || nb[i] > bout.len - at;
        if (!bad) memcpy(out + at, src + off[i], (size_t)nb[i]);
        if (view) PyBuffer_Release(&bb);
        if (bad) {
            PyErr_Format(PyExc_ValueError, "mmeval_coco_native.gather: blob %zd holds no bytes %lld..%lld (or out is short)",
                         i, (long long)off[i], (long long)(off[i] + nb[i]));
            goto done;
        }
        at += nb[i];
    }
    if (at != bout.len) PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.gather: out is longer than the bytes");
done:
    PyBuffer_Release(&bo); PyBuffer_Release(&bn); PyBuffer_Release(&bout);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* pack_rows(heads bytes (n * width), width, columns list of buffers, at i8[count * (n + 1)]) -> list of n bytes
 * Row i: heads[i * width : (i + 1) * width], then for each column j its bytes at[j, i] .. at[j, i + 1] -- what
 * mmeval.core.packed.pack_many joins row by row, byte for byte. */
static PyObject *py_pack_rows(PyObject *self, PyObject *args) {
    Py_buffer bh, bat, cb[64];
    PyObject *cols, *out = NULL;
    Py_ssize_t width, got = 0;
    if (!PyArg_ParseTuple(args, "y*nO!y*", &bh, &width, &PyList_Type, &cols, &bat)) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(cols);
    const int64_t *at = bat.buf;
    Py_ssize_t n = count ? (Py_ssize_t)(bat.len / 8) / count - 1 : 0;
    if (count < 1 || count > 64 || width < 0 || n < 0 || bat.len != 8 * count * (n + 1) || bh.len != n * width) {
        PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.pack_rows: 1 to 64 columns, a header and count "
                                          "offsets per row");
        goto done;
    }
    for (; got < count; got++)
        if (PyObject_GetBuffer(PyList_GET_ITEM(cols, got), &cb[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
    for (Py_ssize_t j = 0; j < count; j++) {
        const int64_t *a = at + j * (n + 1);
        if (a[0] < 0 || a[n] > cb[j].len) goto bad;
        for (Py_ssize_t i = 0; i < n; i++) if (a[i + 1] < a[i]) goto bad;
    }
    out = PyList_New(n);
    if (!out) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t total = width;
        for (Py_ssize_t j = 0; j < count; j++) total += at[j * (n + 1) + i + 1] - at[j * (n + 1) + i];
        PyObject *b = PyBytes_FromStringAndSize(NULL, total);
        if (!b) { Py_CLEAR(out); goto done; }
        char *dst = PyBytes_AS_STRING(b);
        memcpy(dst, (const char *)bh.buf + i * width, (size_t)width);
        dst += width;
        for (Py_ssize_t j = 0; j < count; j++) {
            int64_t a0 = at[j * (n + 1) + i], a1 = at[j * (n + 1) + i + 1];
            memcpy(dst, (const char *)cb[j].buf + a0, (size_t)(a1 - a0));
            dst += a1 - a0;
        }
        PyList_SET_ITEM(out, i, b);
    }
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "mmeval_coco_native.pack_rows: a column's offsets fall outside it or go down");
done:
    for (Py_ssize_t j = 0; j < got; j++) PyBuffer_Release(&cb[j]);
    PyBuffer_Release(&bh); PyBuffer_Release(&bat);
    return out;
}

/* blocks_clear() -> the bytes freed: the pooled blocks' memory given back (_blocks.h). */
static PyObject *py_blocks_clear(PyObject *self, PyObject *unused) { return PyLong_FromSsize_t(blocks_clear()); }

/* blocks_pooled() -> (blocks, bytes) kept in the pool for reuse. */
static PyObject *py_blocks_pooled(PyObject *self, PyObject *unused) {
    Py_ssize_t n, bytes;
    blocks_pooled(&n, &bytes);
    return Py_BuildValue("(nn)", n, bytes);
}

static PyMethodDef methods[] = {
    {"match", py_match, METH_VARARGS, "Greedy COCO matching of grouped detections into packed state words."},
    {"accumulate", py_accumulate, METH_VARARGS, "COCO accumulation of ranked detections' packed states."},
    {"ranked", py_ranked, METH_VARARGS, "COCO ranking: by category, score (highest first), then place."},
    {"rle_decode", py_rle_decode, METH_VARARGS, "pycocotools' compressed RLE strings to runs, with areas."},
    {"kept", py_kept, METH_VARARGS, "Detections by (group, score), the first max_det of each group."},
    {"rle_masks", py_rle_masks, METH_VARARGS, "The compressed RLE dicts that surely pass mmeval's check, with areas."},
    {"rle_masks_runs", py_rle_masks_runs, METH_VARARGS, "rle_masks, with the runs of the masks it passed."},
    {"rle_lists_runs", py_rle_lists_runs, METH_VARARGS, "rle_masks_runs of many lists of masks, without the dicts."},
    {"rle_decode_masks", py_rle_decode_masks, METH_VARARGS, "rle_decode of a list of RLE dicts, in one call."},
    {"rle_iou_parts", py_rle_iou_parts, METH_VARARGS,
     "pycocotools' RLE IoU of (detection, ground truth) pairs, the masks' runs in several buffers."},
    {"read_plain", py_read_plain, METH_VARARGS, "A batch of plain COCODetection inputs checked and joined (_plain.c)."},
    {"pack_rows", py_pack_rows, METH_VARARGS, "Many packed summaries' rows at once (pack_many's bytes)."},
    {"gather", py_gather, METH_VARARGS, "One column of many packed summaries' bytes, joined."},
    {"blocks_clear", py_blocks_clear, METH_NOARGS, "Frees the pooled output blocks' memory; the bytes freed."},
    {"blocks_pooled", py_blocks_pooled, METH_NOARGS, "(blocks, bytes) kept in the output pool for reuse."},
    {"pairwise_sum", py_pairwise_sum, METH_VARARGS, "numpy's pairwise sum of a float64 buffer (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) {
    POW3[0] = 1;
    for (int i = 1; i < TRITS; i++) POW3[i] = POW3[i - 1] * 3;
    for (int v = 0; v < 243; v++) {
        for (int i = 0, x = v; i < 5; i++, x /= 3) TRITS5[v][i] = (uint8_t)(x % 3);
    }
    for (int v = 0; v < 6561; v++) {
        TF8[v] = 0;
        for (int i = 0, x = v; i < 8; i++, x /= 3) {
            if (x % 3 == ST_TP) TF8[v] |= (uint16_t)(1u << i);
            if (x % 3 == ST_FP) TF8[v] |= (uint16_t)(1u << (8 + i));
        }
    }
    KEY_COUNTS = PyUnicode_InternFromString("counts");
    KEY_SIZE = PyUnicode_InternFromString("size");
    if (!KEY_COUNTS || !KEY_SIZE || plain_init() < 0 || PyType_Ready(&BlockType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (!mod) return NULL;
    Py_INCREF(&BlockType);
    if (PyModule_AddObject(mod, "Block", (PyObject *)&BlockType) < 0) {
        Py_DECREF(&BlockType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
