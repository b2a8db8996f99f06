/* Pooled byte blocks: see _blocks.h. */
#include "_blocks.h"

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t cap, len;
} Block;

static struct { char *data; Py_ssize_t cap; } pool[BLOCKS_POOL_SLOTS];
static int pool_n = 0;
static Py_ssize_t pool_bytes = 0;

#define BLOCK_ROUND ((Py_ssize_t)64 << 10)  /* rooms in steps of 64 KiB: a pooled one fits sizes near its own */

/* The pooled memory of the smallest room >= cap and at most twice it, taken out of the pool; else NULL. */
static char *pool_take(Py_ssize_t cap, Py_ssize_t *got) {
    int best = -1;
    for (int i = 0; i < pool_n; i++)
        if (pool[i].cap >= cap && pool[i].cap <= 2 * cap && (best < 0 || pool[i].cap < pool[best].cap)) best = i;
    if (best < 0) return NULL;
    char *data = pool[best].data;
    *got = pool[best].cap;
    pool_bytes -= pool[best].cap;
    pool[best] = pool[--pool_n];
    return data;
}

PyObject *block_new(Py_ssize_t cap) {
    if (cap < 1) cap = 1;
    Py_ssize_t room = 0;
    char *data = pool_take(cap, &room);
    if (!data) {
        room = (cap + BLOCK_ROUND - 1) / BLOCK_ROUND * BLOCK_ROUND;
        data = PyMem_RawMalloc((size_t)room);
        if (!data) return PyErr_NoMemory();
    }
    Block *b = PyObject_New(Block, &BlockType);
    if (!b) {
        PyMem_RawFree(data);
        return NULL;
    }
    b->data = data;
    b->cap = room;
    b->len = room;
    return (PyObject *)b;
}

char *block_data(PyObject *block) { return ((Block *)block)->data; }

void block_set_len(PyObject *block, Py_ssize_t len) {
    Block *b = (Block *)block;
    b->len = len < 0 ? 0 : (len > b->cap ? b->cap : len);
}

static void block_dealloc(PyObject *self) {
    Block *b = (Block *)self;
    if (pool_n < BLOCKS_POOL_SLOTS && pool_bytes + b->cap <= BLOCKS_POOL_BYTES) {
        pool[pool_n].data = b->data;
        pool[pool_n].cap = b->cap;
        pool_n++;
        pool_bytes += b->cap;
    } else {
        PyMem_RawFree(b->data);
    }
    PyObject_Free(self);
}

Py_ssize_t blocks_clear(void) {
    Py_ssize_t freed = pool_bytes;
    for (int i = 0; i < pool_n; i++) PyMem_RawFree(pool[i].data);
    pool_n = 0;
    pool_bytes = 0;
    return freed;
}

void blocks_pooled(Py_ssize_t *n, Py_ssize_t *bytes) {
    *n = pool_n;
    *bytes = pool_bytes;
}

static int block_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Block *b = (Block *)self;
    return PyBuffer_FillInfo(view, self, b->data, b->len, 1, flags);
}

static Py_ssize_t block_length(PyObject *self) { return ((Block *)self)->len; }

static PyObject *block_bytes(PyObject *self, PyObject *unused) {
    Block *b = (Block *)self;
    return PyBytes_FromStringAndSize(b->data, b->len);
}

static PyBufferProcs block_as_buffer = {block_getbuffer, NULL};
static PySequenceMethods block_as_sequence = {block_length};
static PyMethodDef block_methods[] = {
    {"tobytes", block_bytes, METH_NOARGS, "The block's bytes, copied."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mmeval_coco_native._kernels.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = block_dealloc,
    .tp_as_sequence = &block_as_sequence,
    .tp_as_buffer = &block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only bytes from the kernels' pool (the buffer protocol: np.frombuffer reads them).",
    .tp_methods = block_methods,
};
