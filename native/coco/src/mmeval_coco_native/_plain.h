/* A batch of COCODetection's plain inputs checked and converted in one call (see _plain.c). Written for mmeval. */
#ifndef MMEVAL_COCO_NATIVE_PLAIN_H
#define MMEVAL_COCO_NATIVE_PLAIN_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* read_plain(preds, gts, ndarray, integer, n_cls, segm): see _plain.c. */
PyObject *py_read_plain(PyObject *self, PyObject *args);
/* Interns the dict keys it reads; 0 on success, -1 with an exception set. */
int plain_init(void);

#endif
