/* Pooled byte blocks for the kernels' large outputs (the runs of a batch's decoded masks).
 *
 * A block is a Python object exposing its bytes read-only through the buffer protocol (np.frombuffer reads
 * it); its memory, once the object dies, goes back to a small pool and is handed to the next block of about
 * its size instead of to free(). glibc maps each allocation above its mmap threshold afresh and unmaps it at
 * free(): a new 0.5 MB output per add() then costs a page fault per 4 KiB written, about as much as
 * decoding the masks. The pool keeps at most BLOCKS_POOL_SLOTS blocks and BLOCKS_POOL_BYTES bytes;
 * blocks_clear() frees them. Every call holds the GIL. Written for mmeval. */
#ifndef MMEVAL_COCO_NATIVE_BLOCKS_H
#define MMEVAL_COCO_NATIVE_BLOCKS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define BLOCKS_POOL_SLOTS 16
#define BLOCKS_POOL_BYTES ((Py_ssize_t)32 << 20)

extern PyTypeObject BlockType;

/* A new block with room for at least cap bytes (its length cap until block_set_len), or NULL with
 * MemoryError set. */
PyObject *block_new(Py_ssize_t cap);
/* Its memory (cap bytes, uninitialised). */
char *block_data(PyObject *block);
/* Its length as a buffer: at most its room. */
void block_set_len(PyObject *block, Py_ssize_t len);
/* Frees every pooled block's memory; the number of bytes freed. */
Py_ssize_t blocks_clear(void);
/* The pool now: (blocks, bytes) kept for reuse. */
void blocks_pooled(Py_ssize_t *n, Py_ssize_t *bytes);

#endif
