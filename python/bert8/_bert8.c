/* _bert8.c: the CPython extension module bert8._bert8, a thin layer over the public C API
 * (bert8.h, bert8_pipeline.h) that the Python package (bert8/__init__.py and friends) wraps.
 *
 * Arrays cross the boundary through the buffer protocol: inputs are any C-contiguous int32
 * buffers (NumPy arrays; the Python layer converts other dtypes), outputs are Buffer objects that
 * NumPy views without copying (np.asarray). A Buffer either owns memory the library wrote into
 * directly (classify, embed, rerank scores) or keeps alive the object that owns it (an encoding,
 * token embeddings, a leased session). The GIL is released around every call that tokenizes or
 * computes. Errors become bert8.Error(message, status, status_name).
 *
 * Concurrency: a Model keeps a pool of idle sessions; each forward call takes one (or creates
 * one) and gives it back afterwards, so any number of Python threads may share one Model. The
 * pool is only touched with the GIL held. Tokenizers and pipelines are thread-safe in C. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bert8.h"
#include "bert8_pipeline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ERR_LEN 1024
#define POOL_MAX_IDLE 16

/* ---- errors ------------------------------------------------------------------------------ */

static PyObject *error_type; /* bert8.Error, installed by the package (_set_error_type) */

static PyObject *raise_status(bert8_status st, const char *msg) {
    PyObject *type = error_type ? error_type : PyExc_RuntimeError;
    PyObject *args = Py_BuildValue("(sis)", msg && *msg ? msg : bert8_status_string(st), (int)st,
                                   bert8_status_string(st));
    if (args) {
        PyErr_SetObject(type, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *set_error_type(PyObject *self, PyObject *cls) {
    (void)self;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "expected an Exception subclass");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(error_type, cls);
    Py_RETURN_NONE;
}

/* ---- Buffer: an n-d array NumPy can view ------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    void *data;
    void *mem;       /* freed with free() on dealloc, or NULL */
    PyObject *owner; /* kept alive while the buffer lives, or NULL */
    int ndim;
    Py_ssize_t shape[4], strides[4], itemsize;
    char format[2];
    Py_ssize_t exports;
} Buffer;

static void buffer_dealloc(Buffer *b) {
    free(b->mem);
    Py_XDECREF(b->owner);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int buffer_getbuffer(Buffer *b, Py_buffer *view, int flags) {
    (void)flags;
    Py_ssize_t len = b->itemsize;
    for (int i = 0; i < b->ndim; i++) len *= b->shape[i];
    view->buf = b->data;
    view->obj = (PyObject *)b;
    Py_INCREF(b);
    view->len = len;
    view->readonly = 0;
    view->itemsize = b->itemsize;
    view->format = b->format;
    view->ndim = b->ndim;
    view->shape = b->shape;
    view->strides = b->strides;
    view->suboffsets = NULL;
    view->internal = NULL;
    b->exports++;
    return 0;
}

static void buffer_releasebuffer(Buffer *b, Py_buffer *view) {
    (void)view;
    b->exports--;
}

static PyBufferProcs buffer_as_buffer = {(getbufferproc)buffer_getbuffer, (releasebufferproc)buffer_releasebuffer};

static PyObject *buffer_shape(Buffer *b, void *closure) {
    (void)closure;
    PyObject *t = PyTuple_New(b->ndim);
    for (int i = 0; t && i < b->ndim; i++) PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(b->shape[i]));
    return t;
}

static PyGetSetDef buffer_getset[] = {{"shape", (getter)buffer_shape, NULL, "the array's shape", NULL},
                                      {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bert8._bert8.Buffer",
    .tp_basicsize = sizeof(Buffer),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array in C memory; numpy.asarray() views it without copying.",
    .tp_getset = buffer_getset,
};

/* A Buffer over data of type fmt ('f' float32, 'i' int32, 'q' int64) with the given shape. When
 * mem is not NULL the buffer frees it; when owner is not NULL the buffer keeps a reference. */
static PyObject *buffer_new(void *data, void *mem, PyObject *owner, char fmt, int ndim, const int64_t *shape) {
    Buffer *b = PyObject_New(Buffer, &BufferType);
    if (!b) {
        free(mem);
        return NULL;
    }
    b->data = data;
    b->mem = mem;
    b->owner = owner;
    Py_XINCREF(owner);
    b->ndim = ndim;
    b->itemsize = fmt == 'f' || fmt == 'i' ? 4 : 8;
    b->format[0] = fmt;
    b->format[1] = 0;
    b->exports = 0;
    Py_ssize_t stride = b->itemsize;
    for (int i = ndim - 1; i >= 0; i--) {
        b->shape[i] = (Py_ssize_t)shape[i];
        b->strides[i] = stride;
        stride *= b->shape[i];
    }
    return (PyObject *)b;
}

/* A Buffer owning a fresh zeroed allocation of the given shape; *data receives the pointer. */
static PyObject *buffer_alloc(char fmt, int ndim, const int64_t *shape, void **data) {
    size_t n = fmt == 'f' || fmt == 'i' ? 4 : 8;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && n > SIZE_MAX / (size_t)shape[i])) {
            PyErr_SetString(PyExc_OverflowError, "array too large");
            return NULL;
        }
        n *= (size_t)shape[i];
    }
    void *mem = calloc(n ? n : 1, 1);
    if (!mem) return PyErr_NoMemory();
    *data = mem;
    return buffer_new(mem, mem, NULL, fmt, ndim, shape);
}

/* ---- arguments ----------------------------------------------------------------------------- */

/* Gets a C-contiguous buffer of int32 (fmt 'i') or int64 (fmt 'q') values with ndim dimensions. */
static int get_int_buffer(PyObject *obj, Py_buffer *view, int ndim, char fmt, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous integer array (a NumPy array), not %.100s", name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    Py_ssize_t want = fmt == 'i' ? 4 : 8;
    int ok = view->itemsize == want && f[1] == 0 && (*f == 'i' || *f == 'l' || *f == 'q');
    if (!ok || view->ndim != ndim) {
        PyErr_Format(PyExc_TypeError, "%s must be a %d-d array of %s, got %d-d with format '%s'", name, ndim,
                     fmt == 'i' ? "int32" : "int64", view->ndim, view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Texts of a sequence of str (None entries allowed when allow_none), as UTF-8 with lengths.
 * The tuple keeps the strings (and so their cached UTF-8) alive while the GIL is released. */
typedef struct texts {
    PyObject *tuple;
    bert8_text *t;
    unsigned char *ascii; /* 1 when the text is ASCII (byte offsets are character offsets) */
    Py_ssize_t n;
} texts;

static void texts_free(texts *x) {
    Py_XDECREF(x->tuple);
    PyMem_Free(x->t);
    PyMem_Free(x->ascii);
    memset(x, 0, sizeof *x);
}

static int texts_get(PyObject *obj, int allow_none, texts *out, const char *name) {
    memset(out, 0, sizeof *out);
    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of str", name);
        return -1;
    }
    if (!(out->tuple = PySequence_Tuple(obj))) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s must be a list of str, not %.100s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    out->n = PyTuple_GET_SIZE(out->tuple);
    out->t = PyMem_Calloc((size_t)out->n + 1, sizeof *out->t);
    out->ascii = PyMem_Calloc((size_t)out->n + 1, 1);
    if (!out->t || !out->ascii) {
        texts_free(out);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < out->n; i++) {
        PyObject *s = PyTuple_GET_ITEM(out->tuple, i);
        if (s == Py_None && allow_none) continue;
        if (!PyUnicode_Check(s)) {
            PyErr_Format(PyExc_TypeError, "%s[%zd] must be a str, not %.100s", name, i, Py_TYPE(s)->tp_name);
            texts_free(out);
            return -1;
        }
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(s, &len);
        if (!u) {
            texts_free(out);
            return -1;
        }
        out->t[i] = (bert8_text){u, (size_t)len};
        out->ascii[i] = (unsigned char)PyUnicode_IS_ASCII(s);
    }
    return 0;
}

static int text_get(PyObject *obj, bert8_text *out, const char *name) {
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t len;
    const char *u = PyUnicode_AsUTF8AndSize(obj, &len);
    if (!u) return -1;
    *out = (bert8_text){u, (size_t)len};
    return 0;
}

/* Character offset of byte offset b in UTF-8 text s (counts the bytes that start a code point). */
static int64_t char_offset(const char *s, int64_t b) {
    int64_t c = 0;
    for (int64_t i = 0; i < b; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* ---- Model --------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    bert8_model *model;
    int threads; /* pool size each call asks for (bert8_set_threads is per calling thread) */
    bert8_session **idle;
    Py_ssize_t n_idle;
    double last_forward_seconds; /* wall time inside bert8_forward* of the latest call */
} Model;

static PyTypeObject ModelType;

static void model_dealloc(Model *m) {
    for (Py_ssize_t i = 0; i < m->n_idle; i++) bert8_session_free(m->idle[i]);
    PyMem_Free(m->idle);
    bert8_model_free(m->model);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static int model_init(Model *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", "threads", "verbose", "lora_task", NULL};
    PyObject *path;
    int threads = 0, verbose = 0;
    const char *lora_task = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|ipz", kwlist, PyUnicode_FSConverter, &path, &threads, &verbose,
                                     &lora_task))
        return -1;
    if (m->model) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_RuntimeError, "Model is already loaded");
        return -1;
    }
    if (threads < 0) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_ValueError, "threads must be >= 0 (0: the number of physical cores)");
        return -1;
    }
    bert8_load_params lp = bert8_default_load_params();
    lp.threads = threads;
    lp.verbose = verbose;
    lp.lora_task = lora_task;
    char err[ERR_LEN] = "";
    bert8_status st;
    const char *dir = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    st = bert8_model_load(dir, &lp, &m->model, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (st != BERT8_OK) {
        raise_status(st, err);
        return -1;
    }
    m->threads = threads > 0 ? threads : bert8_physical_cores();
    m->idle = PyMem_Calloc(POOL_MAX_IDLE, sizeof *m->idle);
    if (!m->idle) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int model_ready(Model *m) {
    if (!m->model) {
        PyErr_SetString(PyExc_RuntimeError, "Model is not loaded");
        return 0;
    }
    return 1;
}

/* A session for one call (GIL held). */
static bert8_session *model_acquire(Model *m) {
    if (m->n_idle > 0) return m->idle[--m->n_idle];
    bert8_session *s = NULL;
    bert8_status st = bert8_session_create(m->model, &s);
    if (st != BERT8_OK) raise_status(st, "cannot create a session");
    return s;
}

static void model_release(Model *m, bert8_session *s) {
    if (m->n_idle < POOL_MAX_IDLE) m->idle[m->n_idle++] = s;
    else bert8_session_free(s);
}

/* Lease: a session lent to the arrays of one call (copy=False); back to the pool when they die. */
typedef struct {
    PyObject_HEAD
    Model *model;
    bert8_session *session;
} Lease;

static void lease_dealloc(Lease *l) {
    if (l->session) model_release(l->model, l->session);
    Py_XDECREF(l->model);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static PyTypeObject LeaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bert8._bert8.Lease",
    .tp_basicsize = sizeof(Lease),
    .tp_dealloc = (destructor)lease_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A session lent to the output arrays of one forward call.",
};

static PyObject *str_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

static const char *head_name(bert8_head h) {
    return h == BERT8_HEAD_BASE      ? "base"
           : h == BERT8_HEAD_SEQ_CLS ? "sequence_classification"
           : h == BERT8_HEAD_TOKEN_CLS ? "token_classification"
                                     : "question_answering";
}

static PyObject *model_info_dict(const bert8_model *model) {
    const bert8_model_info *in = bert8_model_get_info(model);
    PyObject *labels = PyList_New(0);
    if (!labels) return NULL;
    for (int64_t i = 0; i < in->num_labels; i++) {
        const char *l = bert8_model_label(model, i);
        PyObject *s = str_or_none(l);
        if (!s || PyList_Append(labels, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(labels);
            return NULL;
        }
        Py_DECREF(s);
    }
    return Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:d,s:s,s:O,s:O,s:O,s:L,s:L,s:O,s:z,s:i,s:L,s:L,s:L,s:N,s:s,s:s}", "arch",
        bert8_arch_name(in->arch), "head", head_name(in->head), "model_type", in->model_type ? in->model_type : "",
        "architecture", in->architecture ? in->architecture : "", "vocab_size", (long long)in->vocab_size,
        "hidden_size", (long long)in->hidden_size, "num_layers", (long long)in->num_layers, "num_heads",
        (long long)in->num_heads, "intermediate_size", (long long)in->intermediate_size, "max_position_embeddings",
        (long long)in->max_position_embeddings, "type_vocab_size", (long long)in->type_vocab_size, "num_labels",
        (long long)in->num_labels, "pad_token_id", (long long)in->pad_token_id, "max_seq_len",
        (long long)in->max_seq_len, "layer_norm_eps", in->layer_norm_eps, "hidden_act",
        in->hidden_act ? in->hidden_act : "", "has_pooler", in->has_pooler ? Py_True : Py_False, "has_mlm_head",
        in->has_mlm_head ? Py_True : Py_False, "ffn_gated", in->ffn_gated ? Py_True : Py_False, "sliding_layers",
        (long long)in->sliding_layers, "attention_window", (long long)in->attention_window, "quantized",
        in->quantized ? Py_True : Py_False, "scheme",
        in->quantized ? (in->scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic") : NULL, "weight_bits",
        in->weight_bits, "tensor_count",
        (long long)in->tensor_count, "weight_bytes", (long long)in->weight_bytes, "param_count",
        (long long)in->param_count, "labels", labels, "path", bert8_model_dir(model) ? bert8_model_dir(model) : "",
        "lora_task", in->lora_task ? in->lora_task : "");
}

static PyObject *model_info(Model *m, PyObject *unused) {
    (void)unused;
    if (!model_ready(m)) return NULL;
    return model_info_dict(m->model);
}

/* The outputs of a call as a dict of Buffers: copies (owner NULL) or views kept alive by owner. */
static PyObject *outputs_dict(const bert8_outputs *o, PyObject *owner, void **copies) {
    static const char *names[] = {"last_hidden_state", "pooler_output", "logits", "start_logits", "end_logits"};
    const bert8_tensor *ts[] = {&o->last_hidden_state, &o->pooler_output, &o->logits, &o->start_logits,
                                &o->end_logits};
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int i = 0; i < 5; i++) {
        if (!ts[i]->data) continue;
        void *mem = copies ? copies[i] : NULL;
        if (copies) copies[i] = NULL; /* the Buffer owns it now */
        PyObject *b = buffer_new(mem ? mem : (void *)ts[i]->data, mem, owner, 'f', ts[i]->ndim, ts[i]->shape);
        if (!b || PyDict_SetItemString(d, names[i], b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(b);
    }
    return d;
}

static size_t tensor_bytes(const bert8_tensor *t) {
    size_t n = sizeof(float);
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

/* Copies each output into its own allocation (GIL released); 0 on success. */
static int copy_outputs(const bert8_outputs *o, void **copies) {
    const bert8_tensor *ts[] = {&o->last_hidden_state, &o->pooler_output, &o->logits, &o->start_logits,
                                &o->end_logits};
    for (int i = 0; i < 5; i++) {
        copies[i] = NULL;
        if (!ts[i]->data) continue;
        size_t n = tensor_bytes(ts[i]);
        if (!(copies[i] = malloc(n ? n : 1))) return -1;
        memcpy(copies[i], ts[i]->data, n);
    }
    return 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs one forward call (padded when packed is NULL) and returns the outputs dict. */
static PyObject *model_run(Model *m, const bert8_batch *batch, const bert8_packed_batch *packed, int copy) {
    bert8_session *s = model_acquire(m);
    if (!s) return NULL;
    bert8_outputs out = {0};
    bert8_status st;
    void *copies[5] = {NULL, NULL, NULL, NULL, NULL};
    int copy_failed = 0;
    int threads = m->threads;
    double t0 = 0, t1 = 0;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    t0 = now_seconds();
    st = packed ? bert8_forward_packed(s, packed, &out) : bert8_forward(s, batch, &out);
    t1 = now_seconds();
    if (st == BERT8_OK && copy) copy_failed = copy_outputs(&out, copies);
    Py_END_ALLOW_THREADS
    m->last_forward_seconds = t1 - t0;
    if (st != BERT8_OK) {
        raise_status(st, bert8_session_last_error(s));
        model_release(m, s);
        return NULL;
    }
    PyObject *d = NULL, *cu = NULL;
    if (copy) {
        if (copy_failed) {
            model_release(m, s);
            for (int i = 0; i < 5; i++) free(copies[i]);
            return PyErr_NoMemory();
        }
        d = outputs_dict(&out, NULL, copies);
        for (int i = 0; i < 5; i++) free(copies[i]);
        if (d && out.cu_seqlens) {
            int64_t n1 = out.num_sequences + 1;
            void *p = NULL;
            if ((cu = buffer_alloc('q', 1, &n1, &p))) memcpy(p, out.cu_seqlens, (size_t)n1 * sizeof(int64_t));
        }
        model_release(m, s);
    } else {
        Lease *l = PyObject_New(Lease, &LeaseType);
        if (!l) {
            model_release(m, s);
            return NULL;
        }
        Py_INCREF(m);
        l->model = m;
        l->session = s;
        d = outputs_dict(&out, (PyObject *)l, NULL);
        if (d && out.cu_seqlens) {
            int64_t n1 = out.num_sequences + 1;
            cu = buffer_new((void *)out.cu_seqlens, NULL, (PyObject *)l, 'q', 1, &n1);
        }
        Py_DECREF(l);
    }
    if (d && out.cu_seqlens) {
        if (!cu || PyDict_SetItemString(d, "cu_seqlens", cu) < 0) Py_CLEAR(d);
    }
    Py_XDECREF(cu);
    return d;
}

static PyObject *model_forward(Model *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input_ids", "attention_mask", "token_type_ids", "copy", NULL};
    PyObject *ids_o, *mask_o = Py_None, *types_o = Py_None;
    int copy = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOp", kwlist, &ids_o, &mask_o, &types_o, &copy)) return NULL;
    if (!model_ready(m)) return NULL;
    Py_buffer ids, mask = {0}, types = {0};
    if (get_int_buffer(ids_o, &ids, 2, 'i', "input_ids") < 0) return NULL;
    PyObject *result = NULL;
    if (mask_o != Py_None && get_int_buffer(mask_o, &mask, 2, 'i', "attention_mask") < 0) goto out;
    if (types_o != Py_None && get_int_buffer(types_o, &types, 2, 'i', "token_type_ids") < 0) goto out;
    for (int i = 0; i < 2; i++) {
        if ((mask.buf && mask.shape[i] != ids.shape[i]) || (types.buf && types.shape[i] != ids.shape[i])) {
            PyErr_SetString(PyExc_ValueError, "attention_mask and token_type_ids must have the shape of input_ids");
            goto out;
        }
    }
    bert8_batch b = {ids.shape[0], ids.shape[1], ids.buf, mask.buf, types.buf};
    result = model_run(m, &b, NULL, copy);
out:
    PyBuffer_Release(&ids);
    if (mask.obj) PyBuffer_Release(&mask);
    if (types.obj) PyBuffer_Release(&types);
    return result;
}

static PyObject *model_forward_packed(Model *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"input_ids", "cu_seqlens", "token_type_ids", "copy", NULL};
    PyObject *ids_o, *cu_o, *types_o = Py_None;
    int copy = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Op", kwlist, &ids_o, &cu_o, &types_o, &copy)) return NULL;
    if (!model_ready(m)) return NULL;
    Py_buffer ids, cu = {0}, types = {0};
    if (get_int_buffer(ids_o, &ids, 1, 'i', "input_ids") < 0) return NULL;
    PyObject *result = NULL;
    if (get_int_buffer(cu_o, &cu, 1, 'q', "cu_seqlens") < 0) goto out;
    if (types_o != Py_None && get_int_buffer(types_o, &types, 1, 'i', "token_type_ids") < 0) goto out;
    const int64_t *c = cu.buf;
    int64_t ns = cu.shape[0] - 1;
    if (ns < 1 || c[0] != 0 || c[ns] != ids.shape[0] || (types.buf && types.shape[0] != ids.shape[0])) {
        PyErr_SetString(PyExc_ValueError, "cu_seqlens must start at 0 and end at len(input_ids), with at least "
                                          "one sequence; token_type_ids must have the length of input_ids");
        goto out;
    }
    bert8_packed_batch b = {ns, c, ids.buf, types.buf};
    result = model_run(m, NULL, &b, copy);
out:
    PyBuffer_Release(&ids);
    if (cu.obj) PyBuffer_Release(&cu);
    if (types.obj) PyBuffer_Release(&types);
    return result;
}

static PyObject *model_quantize(Model *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"batches", "scheme", "alpha", "smooth", "max_samples", "keep_fp32", "progress",
                             "int8_attention", "int8_embeddings", "weight_bits", "ffn_out_per_token",
                             "ffn_in_per_token", "outliers", NULL};
    PyObject *batches_o;
    int scheme = BERT8_SCHEME_STATIC, smooth = 1, progress = 0, int8_attention = -1, int8_embeddings = 0;
    int weight_bits = 8, ffn_out_per_token = -1, ffn_in_per_token = -1, outliers = -1;
    double alpha = -1.0;
    long long max_samples = 512;
    const char *keep = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|idpLzpipiiii", kwlist, &batches_o, &scheme, &alpha, &smooth,
                                     &max_samples, &keep, &progress, &int8_attention, &int8_embeddings,
                                     &weight_bits, &ffn_out_per_token, &ffn_in_per_token, &outliers))
        return NULL;
    if (!model_ready(m)) return NULL;
    PyObject *seq = PySequence_Tuple(batches_o);
    if (!seq) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    Py_buffer *views = PyMem_Calloc((size_t)n * 3 + 1, sizeof *views);
    bert8_batch *b = PyMem_Calloc((size_t)n + 1, sizeof *b);
    PyObject *result = NULL;
    if (!views || !b) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "each calibration batch must be (input_ids, attention_mask, token_type_ids)");
            goto out;
        }
        static const char *names[] = {"input_ids", "attention_mask", "token_type_ids"};
        for (int k = 0; k < 3; k++)
            if (get_int_buffer(PyTuple_GET_ITEM(item, k), &views[3 * i + k], 2, 'i', names[k]) < 0) goto out;
        for (int k = 1; k < 3; k++)
            if (views[3 * i + k].shape[0] != views[3 * i].shape[0] || views[3 * i + k].shape[1] != views[3 * i].shape[1]) {
                PyErr_SetString(PyExc_ValueError, "calibration arrays of one batch must have one shape");
                goto out;
            }
        b[i] = (bert8_batch){views[3 * i].shape[0], views[3 * i].shape[1], views[3 * i].buf, views[3 * i + 1].buf,
                             views[3 * i + 2].buf};
    }
    bert8_quant_params qp = bert8_default_quant_params();
    qp.scheme = (bert8_scheme)scheme;
    qp.alpha = (float)alpha;
    qp.smooth = smooth;
    qp.max_samples = max_samples;
    qp.keep_fp32 = keep;
    qp.progress = progress;
    qp.int8_attention = int8_attention;
    qp.int8_embeddings = int8_embeddings;
    qp.weight_bits = weight_bits;
    qp.ffn_out_per_token = ffn_out_per_token;
    qp.ffn_in_per_token = ffn_in_per_token;
    qp.outliers = outliers;
    bert8_model *q = NULL;
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = m->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_quantize(m->model, b, (size_t)n, &qp, &q, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BERT8_OK) {
        raise_status(st, err);
        goto out;
    }
    Model *r = (Model *)ModelType.tp_alloc(&ModelType, 0);
    if (!r || !(r->idle = PyMem_Calloc(POOL_MAX_IDLE, sizeof *r->idle))) {
        bert8_model_free(q);
        Py_XDECREF(r);
        if (r) PyErr_NoMemory();
        goto out;
    }
    r->model = q;
    r->threads = m->threads;
    result = (PyObject *)r;
out:
    for (Py_ssize_t i = 0; views && i < 3 * n; i++)
        if (views[i].obj) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(b);
    Py_DECREF(seq);
    return result;
}

static PyObject *model_save(Model *m, PyObject *args) {
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path)) return NULL;
    if (!model_ready(m)) {
        Py_DECREF(path);
        return NULL;
    }
    char err[ERR_LEN] = "";
    bert8_status st;
    const char *dir = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    st = bert8_model_save(m->model, dir, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (st != BERT8_OK) return raise_status(st, err);
    Py_RETURN_NONE;
}

static PyObject *model_set_threads(Model *m, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    m->threads = n > 0 ? (int)n : bert8_physical_cores();
    Py_RETURN_NONE;
}

static PyObject *model_get_threads(Model *m, void *closure) {
    (void)closure;
    return PyLong_FromLong(m->threads);
}

static PyObject *model_idle_sessions(Model *m, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(m->n_idle);
}

static PyMethodDef model_methods[] = {
    {"info", (PyCFunction)model_info, METH_NOARGS, "info() -> dict: the model's configuration and sizes."},
    {"forward", (PyCFunction)(void (*)(void))model_forward, METH_VARARGS | METH_KEYWORDS,
     "forward(input_ids, attention_mask=None, token_type_ids=None, copy=True) -> dict of Buffers.\n"
     "The arrays are C-contiguous int32 [batch, seq]."},
    {"forward_packed", (PyCFunction)(void (*)(void))model_forward_packed, METH_VARARGS | METH_KEYWORDS,
     "forward_packed(input_ids, cu_seqlens, token_type_ids=None, copy=True) -> dict of Buffers.\n"
     "input_ids int32 [tokens], cu_seqlens int64 [n + 1]."},
    {"quantize", (PyCFunction)(void (*)(void))model_quantize, METH_VARARGS | METH_KEYWORDS,
     "quantize(batches, scheme=0, alpha=-1 (auto), smooth=True, max_samples=512, keep_fp32=None, progress=False, "
     "int8_attention=-1, int8_embeddings=0, weight_bits=8, ffn_out_per_token=-1, "
     "ffn_in_per_token=-1, outliers=-1)"
     " -> Model"},
    {"save", (PyCFunction)model_save, METH_VARARGS, "save(dir): writes a loadable folder of an INT8 model."},
    {"set_threads", (PyCFunction)model_set_threads, METH_O, "set_threads(n): OpenMP threads per call (0: cores)."},
    {NULL, NULL, 0, NULL}};

static PyObject *model_last_forward_seconds(Model *m, void *closure) {
    (void)closure;
    return PyFloat_FromDouble(m->last_forward_seconds);
}

static PyGetSetDef model_getset[] = {
    {"last_forward_seconds", (getter)model_last_forward_seconds, NULL,
     "wall time inside bert8_forward of the latest call on this model (for overhead measurements)", NULL},
    {"threads", (getter)model_get_threads, NULL, "OpenMP threads each call runs on", NULL},
    {"idle_sessions", (getter)model_idle_sessions, NULL, "sessions waiting in the pool", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bert8._bert8.Model",
    .tp_basicsize = sizeof(Model),
    .tp_dealloc = (destructor)model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Model(path, threads=0, verbose=False): a loaded checkpoint folder (bert8_model).",
    .tp_methods = model_methods,
    .tp_getset = model_getset,
    .tp_init = (initproc)model_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Tokenizer ----------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    bert8_tokenizer *tok;
} Tokenizer;

static void tokenizer_dealloc(Tokenizer *t) {
    bert8_tokenizer_free(t->tok);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static int tokenizer_init(Tokenizer *t, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path", NULL};
    PyObject *path;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&", kwlist, PyUnicode_FSConverter, &path)) return -1;
    if (t->tok) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_RuntimeError, "Tokenizer is already loaded");
        return -1;
    }
    char err[ERR_LEN] = "";
    bert8_status st;
    const char *dir = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    st = bert8_tokenizer_load(dir, &t->tok, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (st != BERT8_OK) {
        raise_status(st, err);
        return -1;
    }
    return 0;
}

static int tokenizer_ready(Tokenizer *t) {
    if (!t->tok) {
        PyErr_SetString(PyExc_RuntimeError, "Tokenizer is not loaded");
        return 0;
    }
    return 1;
}

/* Encoding: owns a bert8_encoding that Buffers view. */
typedef struct {
    PyObject_HEAD
    bert8_encoding enc;
} Encoding;

static void encoding_dealloc(Encoding *e) {
    bert8_encoding_free(&e->enc);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyTypeObject EncodingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bert8._bert8.Encoding",
    .tp_basicsize = sizeof(Encoding),
    .tp_dealloc = (destructor)encoding_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The rows of one tokenizer call (bert8_encoding), viewed by Buffers.",
};

static int dict_put(PyObject *d, const char *key, PyObject *value) {
    if (!value) return -1;
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

/* Character offsets [rows][seq][2] of an encoding: byte offsets converted in the token's own
 * text; special tokens and padding get (0, 0) as the Hugging Face fast tokenizers give. Tokens of
 * one sequence run left to right, so the count goes on from the previous token's start. */
static void char_offsets(const bert8_tokenizer *tok, const bert8_encoding *e, const texts *a, const texts *b,
                         int64_t *out) {
    for (int64_t r = 0; r < e->rows; r++) {
        const int64_t in = e->row_input[r];
        int64_t cur_b[2] = {0, 0}, cur_c[2] = {0, 0};
        for (int64_t t = 0; t < e->seq; t++) {
            const int64_t k = r * e->seq + t;
            const int32_t sid = e->sequence_ids[k];
            const texts *x = sid == 0 ? a : sid == 1 ? b : NULL;
            if (!x || !x->t[in].data) {
                out[2 * k] = out[2 * k + 1] = 0;
                continue;
            }
            const int64_t s = e->offsets[2 * k], en = e->offsets[2 * k + 1];
            if (x->ascii[in]) {
                out[2 * k] = s;
                out[2 * k + 1] = en;
                continue;
            }
            const char *u = x->t[in].data;
            if (s < cur_b[sid]) cur_b[sid] = cur_c[sid] = 0;
            const int64_t cs = cur_c[sid] + char_offset(u + cur_b[sid], s - cur_b[sid]);
            out[2 * k] = cs;
            out[2 * k + 1] = cs + char_offset(u + s, en - s);
            cur_b[sid] = s;
            cur_c[sid] = cs;
        }
        /* A SentencePiece token that is only the word-boundary mark U+2581 covers blanks (or, at
         * the start, nothing). The fast tokenizers report the first character after those blanks
         * instead; so does offset_mapping (byte offsets keep what the token covers). A byte-level
         * BPE token's offsets are already the fast tokenizers' own. */
        for (int64_t t = 0; t < e->seq; t++) {
            const int64_t k = r * e->seq + t;
            const int32_t sid = e->sequence_ids[k];
            const texts *x = sid == 0 ? a : sid == 1 ? b : NULL;
            if (!x || !x->t[in].data) continue;
            const char *piece = bert8_tokenizer_id_to_token(tok, e->input_ids[k]);
            if (!piece || strncmp(piece, "\xe2\x96\x81", 3)) continue;
            const char *u = x->t[in].data;
            const int64_t s = e->offsets[2 * k], en = e->offsets[2 * k + 1], len = (int64_t)x->t[in].len;
            int64_t i = s;
            while (i < en && (u[i] == ' ' || u[i] == '\t' || u[i] == '\n' || u[i] == '\r')) i++;
            if (i < en) continue; /* not blank */
            while (i < len && (u[i] == ' ' || u[i] == '\t' || u[i] == '\n' || u[i] == '\r')) i++;
            if (i >= len) continue;
            out[2 * k] = out[2 * k + 1] + (i - en); /* only ASCII blanks were skipped */
            out[2 * k + 1] = out[2 * k] + 1;
        }
    }
}

static PyObject *tokenizer_encode(Tokenizer *t, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts",  "pairs",    "add_special_tokens", "truncation",    "max_length",
                             "return_overflow", "stride", "pad_to_max_length", "truncate_left", NULL};
    PyObject *texts_o, *pairs_o = Py_None;
    int add_special = 1, truncation = 0, overflow = 0, pad_max = 0, left = 0;
    long long max_length = 0, stride = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OpiLpLpp", kwlist, &texts_o, &pairs_o, &add_special, &truncation,
                                     &max_length, &overflow, &stride, &pad_max, &left))
        return NULL;
    if (!tokenizer_ready(t)) return NULL;
    texts a, b = {0};
    if (texts_get(texts_o, 0, &a, "texts") < 0) return NULL;
    PyObject *result = NULL;
    Encoding *enc = NULL;
    int64_t *offs = NULL;
    if (pairs_o != Py_None) {
        if (texts_get(pairs_o, 1, &b, "text_pair") < 0) goto out;
        if (b.n != a.n) {
            PyErr_Format(PyExc_ValueError, "text_pair has %zd entries for %zd texts", b.n, a.n);
            goto out;
        }
    }
    bert8_encode_params p = bert8_default_encode_params();
    p.add_special_tokens = add_special;
    p.truncation = (bert8_truncation)truncation;
    p.max_length = max_length;
    p.return_overflow = overflow;
    p.stride = stride;
    p.pad_to_max_length = pad_max;
    p.truncate_left = left;
    if (!(enc = PyObject_New(Encoding, &EncodingType))) goto out;
    memset(&enc->enc, 0, sizeof enc->enc);
    char err[ERR_LEN] = "";
    bert8_status st;
    int nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    st = bert8_encode_texts(t->tok, a.n, a.t, b.tuple ? b.t : NULL, &p, &enc->enc, err, sizeof err);
    if (st == BERT8_OK) {
        size_t n = (size_t)(enc->enc.rows * enc->enc.seq) * 2;
        offs = malloc((n ? n : 1) * sizeof *offs);
        if (offs) char_offsets(t->tok, &enc->enc, &a, &b, offs);
        else nomem = 1;
    }
    Py_END_ALLOW_THREADS
    if (st != BERT8_OK) {
        raise_status(st, err);
        goto out;
    }
    if (nomem) {
        PyErr_NoMemory();
        goto out;
    }
    const bert8_encoding *e = &enc->enc;
    PyObject *o = (PyObject *)enc;
    int64_t rs[3] = {e->rows, e->seq, 2}, r1[1] = {e->rows};
    PyObject *offs_buf = buffer_new(offs, offs, NULL, 'q', 3, rs); /* owns offs, or freed it */
    offs = NULL;
    if (!offs_buf) goto out;
    PyObject *d = PyDict_New();
    if (!d || dict_put(d, "offset_mapping", offs_buf) < 0) {
        if (!d) Py_DECREF(offs_buf);
        Py_XDECREF(d);
        goto out;
    }
    if (dict_put(d, "input_ids", buffer_new((void *)e->input_ids, NULL, o, 'i', 2, rs)) < 0 ||
        dict_put(d, "attention_mask", buffer_new((void *)e->attention_mask, NULL, o, 'i', 2, rs)) < 0 ||
        dict_put(d, "token_type_ids", buffer_new((void *)e->token_type_ids, NULL, o, 'i', 2, rs)) < 0 ||
        dict_put(d, "special_tokens_mask", buffer_new((void *)e->special_mask, NULL, o, 'i', 2, rs)) < 0 ||
        dict_put(d, "sequence_ids", buffer_new((void *)e->sequence_ids, NULL, o, 'i', 2, rs)) < 0 ||
        dict_put(d, "word_ids", buffer_new((void *)e->word_ids, NULL, o, 'i', 2, rs)) < 0 ||
        dict_put(d, "byte_offsets", buffer_new((void *)e->offsets, NULL, o, 'q', 3, rs)) < 0 ||
        dict_put(d, "lengths", buffer_new((void *)e->lengths, NULL, o, 'q', 1, r1)) < 0 ||
        dict_put(d, "overflow_to_sample_mapping", buffer_new((void *)e->row_input, NULL, o, 'q', 1, r1)) < 0 ||
        dict_put(d, "row_window", buffer_new((void *)e->row_window, NULL, o, 'q', 1, r1)) < 0) {
        Py_DECREF(d);
        goto out;
    }
    result = d;
out:
    free(offs);
    Py_XDECREF(enc);
    texts_free(&a);
    texts_free(&b);
    return result;
}

static PyObject *tokenizer_decode(Tokenizer *t, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"ids", "skip_special_tokens", NULL};
    PyObject *ids_o;
    int skip = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p", kwlist, &ids_o, &skip)) return NULL;
    if (!tokenizer_ready(t)) return NULL;
    Py_buffer ids;
    if (get_int_buffer(ids_o, &ids, 1, 'i', "ids") < 0) return NULL;
    char *s = NULL, err[ERR_LEN] = "";
    bert8_status st;
    Py_BEGIN_ALLOW_THREADS
    st = bert8_decode(t->tok, ids.buf, ids.shape[0], skip, &s, err, sizeof err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ids);
    if (st != BERT8_OK) return raise_status(st, err);
    PyObject *r = PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
    free(s);
    return r;
}

static PyObject *tokenizer_id_to_token(Tokenizer *t, PyObject *arg) {
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred()) return NULL;
    if (!tokenizer_ready(t)) return NULL;
    if (id < INT32_MIN || id > INT32_MAX) Py_RETURN_NONE;
    return str_or_none(bert8_tokenizer_id_to_token(t->tok, (int32_t)id));
}

static PyObject *tokenizer_is_special(Tokenizer *t, PyObject *arg) {
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred()) return NULL;
    if (!tokenizer_ready(t)) return NULL;
    if (id < INT32_MIN || id > INT32_MAX) Py_RETURN_FALSE;
    return PyBool_FromLong(bert8_tokenizer_is_special(t->tok, (int32_t)id));
}

static PyObject *tokenizer_special_ids(Tokenizer *t, PyObject *unused) {
    (void)unused;
    if (!tokenizer_ready(t)) return NULL;
    const bert8_tokenizer *k = t->tok;
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i}", "unk", bert8_tokenizer_special_id(k, BERT8_TOKEN_UNK), "cls",
                         bert8_tokenizer_special_id(k, BERT8_TOKEN_CLS), "sep",
                         bert8_tokenizer_special_id(k, BERT8_TOKEN_SEP), "pad",
                         bert8_tokenizer_special_id(k, BERT8_TOKEN_PAD), "mask",
                         bert8_tokenizer_special_id(k, BERT8_TOKEN_MASK));
}

static PyObject *tokenizer_vocab_size(Tokenizer *t, void *closure) {
    (void)closure;
    if (!tokenizer_ready(t)) return NULL;
    return PyLong_FromLongLong(bert8_tokenizer_vocab_size(t->tok));
}

static PyObject *tokenizer_model_max_length(Tokenizer *t, void *closure) {
    (void)closure;
    if (!tokenizer_ready(t)) return NULL;
    return PyLong_FromLongLong(bert8_tokenizer_model_max_length(t->tok));
}

static PyMethodDef tokenizer_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))tokenizer_encode, METH_VARARGS | METH_KEYWORDS,
     "encode(texts, pairs=None, add_special_tokens=True, truncation=0, max_length=0, return_overflow=False,"
     " stride=0, pad_to_max_length=False, truncate_left=False) -> dict of Buffers (padded rows)."},
    {"decode", (PyCFunction)(void (*)(void))tokenizer_decode, METH_VARARGS | METH_KEYWORDS,
     "decode(ids, skip_special_tokens=False) -> str; ids: 1-d int32 array."},
    {"id_to_token", (PyCFunction)tokenizer_id_to_token, METH_O, "id_to_token(id) -> str or None"},
    {"is_special", (PyCFunction)tokenizer_is_special, METH_O, "is_special(id) -> bool"},
    {"special_ids", (PyCFunction)tokenizer_special_ids, METH_NOARGS, "special_ids() -> dict (-1: none)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef tokenizer_getset[] = {
    {"vocab_size", (getter)tokenizer_vocab_size, NULL, "entries in the vocabulary", NULL},
    {"model_max_length", (getter)tokenizer_model_max_length, NULL, "the tokenizer's model_max_length", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject TokenizerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bert8._bert8.Tokenizer",
    .tp_basicsize = sizeof(Tokenizer),
    .tp_dealloc = (destructor)tokenizer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Tokenizer(path): the WordPiece or Unigram tokenizer of a model folder.",
    .tp_methods = tokenizer_methods,
    .tp_getset = tokenizer_getset,
    .tp_init = (initproc)tokenizer_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Pipeline ------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    bert8_pipeline *p;
    int threads;
} Pipeline;

static void pipeline_dealloc(Pipeline *p) {
    bert8_pipeline_free(p->p);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static int pipeline_init(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"path",           "threads",     "max_batch_tokens", "max_batch_size",
                             "max_length",     "padding_free", "max_text_bytes",  "max_inputs",
                             "max_windows",    "pooling",     "normalize",        "dense_path",
                             "default_prompt_name", "default_prompt", "lora_task", NULL};
    bert8_pipeline_params pp = bert8_default_pipeline_params();
    PyObject *path;
    long long mbt = pp.max_batch_tokens, mbs = pp.max_batch_size, ml = pp.max_length, mtb = pp.max_text_bytes,
              mi = pp.max_inputs, mw = pp.max_windows;
    int threads = 0, pf = pp.padding_free, pooling = (int)pp.pooling, normalize = pp.normalize;
    const char *dense_path = NULL, *dpn = NULL, *dp = NULL, *lora_task = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|iLLLpLLLiizzzz", kwlist, PyUnicode_FSConverter, &path, &threads,
                                     &mbt, &mbs, &ml, &pf, &mtb, &mi, &mw, &pooling, &normalize, &dense_path, &dpn, &dp,
                                     &lora_task))
        return -1;
    if (p->p) {
        Py_DECREF(path);
        PyErr_SetString(PyExc_RuntimeError, "Pipeline is already open");
        return -1;
    }
    pp.threads = threads;
    pp.max_batch_tokens = mbt;
    pp.max_batch_size = mbs;
    pp.max_length = ml;
    pp.padding_free = pf;
    pp.max_text_bytes = mtb;
    pp.max_inputs = mi;
    pp.max_windows = mw;
    pp.pooling = (bert8_pooling)pooling;
    pp.normalize = normalize;
    pp.dense_path = dense_path;
    pp.default_prompt_name = dpn;
    pp.default_prompt = dp;
    pp.lora_task = lora_task;
    char err[ERR_LEN] = "";
    bert8_status st;
    const char *dir = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    st = bert8_pipeline_open(dir, &pp, &p->p, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (st != BERT8_OK) {
        raise_status(st, err);
        return -1;
    }
    p->threads = threads > 0 ? threads : bert8_physical_cores();
    return 0;
}

static int pipeline_ready(Pipeline *p) {
    if (!p->p) {
        PyErr_SetString(PyExc_RuntimeError, "Pipeline is not open");
        return 0;
    }
    return 1;
}

static const char *task_name(bert8_task t) {
    return t == BERT8_TASK_EMBED ? "embed" : t == BERT8_TASK_CLASSIFY ? "classify" : t == BERT8_TASK_QA ? "qa" : "ner";
}

static const char *pooling_name(bert8_pooling p) {
    static const char *const NAMES[] = {
        [BERT8_POOLING_DEFAULT] = "default",        [BERT8_POOLING_CLS] = "cls",
        [BERT8_POOLING_MEAN] = "mean",              [BERT8_POOLING_MAX] = "max",
        [BERT8_POOLING_MEAN_SQRT_LEN] = "mean_sqrt_len_tokens", [BERT8_POOLING_WEIGHTED_MEAN] = "weightedmean",
        [BERT8_POOLING_LAST_TOKEN] = "lasttoken"};
    return (unsigned)p < sizeof NAMES / sizeof *NAMES ? NAMES[p] : "default";
}

static PyObject *pipeline_info(Pipeline *p, PyObject *unused) {
    (void)unused;
    if (!pipeline_ready(p)) return NULL;
    const bert8_pipeline_info *in = bert8_pipeline_get_info(p->p);
    PyObject *model = model_info_dict(bert8_pipeline_model(p->p));
    if (!model) return NULL;
    PyObject *prompts = PyDict_New();
    const char *name, *text;
    for (int64_t i = 0; prompts && bert8_pipeline_prompt(p->p, i, &name, &text); i++) {
        PyObject *v = PyUnicode_FromString(text);
        if (!v || PyDict_SetItemString(prompts, name, v) < 0) Py_CLEAR(prompts);
        Py_XDECREF(v);
    }
    if (!prompts) {
        Py_DECREF(model);
        return NULL;
    }
    return Py_BuildValue("{s:s,s:N,s:L,s:L,s:L,s:s,s:O,s:i,s:N,s:z,s:O,s:L}", "task", task_name(in->task), "model",
                         model, "max_length", (long long)in->max_length, "dim", (long long)in->dim, "num_labels",
                         (long long)in->num_labels, "pooling", pooling_name(in->pooling), "normalize",
                         in->normalize ? Py_True : Py_False, "threads", p->threads, "prompts", prompts,
                         "default_prompt", in->default_prompt, "include_prompt",
                         in->include_prompt ? Py_True : Py_False, "dense_modules", (long long)in->dense_modules);
}

static PyObject *pipeline_label(Pipeline *p, PyObject *arg) {
    long long i = PyLong_AsLongLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (!pipeline_ready(p)) return NULL;
    return str_or_none(bert8_pipeline_label(p->p, i));
}

/* Parses the run options shared by classify, embed, embed_tokens and rerank. */
static bert8_run_options run_options(int truncate, int left, long long max_length) {
    bert8_run_options o = bert8_default_run_options();
    o.truncate = truncate;
    o.truncation_side = left ? BERT8_SIDE_LEFT : BERT8_SIDE_RIGHT;
    o.max_length = max_length;
    return o;
}

static PyObject *pipeline_classify(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts", "pairs", "truncate", "truncate_left", "max_length", "score_fn", NULL};
    PyObject *texts_o, *pairs_o = Py_None;
    int truncate = 1, left = 0, fn = BERT8_SCORE_AUTO;
    long long max_length = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OppLi", kwlist, &texts_o, &pairs_o, &truncate, &left, &max_length,
                                     &fn))
        return NULL;
    if (!pipeline_ready(p)) return NULL;
    texts a, b = {0};
    if (texts_get(texts_o, 0, &a, "texts") < 0) return NULL;
    PyObject *result = NULL;
    if (pairs_o != Py_None) {
        if (texts_get(pairs_o, 1, &b, "text_pair") < 0) goto out;
        if (b.n != a.n) {
            PyErr_Format(PyExc_ValueError, "text_pair has %zd entries for %zd texts", b.n, a.n);
            goto out;
        }
    }
    const bert8_pipeline_info *in = bert8_pipeline_get_info(p->p);
    int64_t shape[2] = {a.n, in->num_labels};
    float *scores = NULL;
    PyObject *buf = buffer_alloc('f', 2, shape, (void **)&scores);
    if (!buf) goto out;
    bert8_run_options o = run_options(truncate, left, max_length);
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_classify(p->p, a.n, a.t, b.tuple ? b.t : NULL, &o, (bert8_score_fn)fn, scores, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BERT8_OK) {
        Py_DECREF(buf);
        raise_status(st, err);
        goto out;
    }
    result = buf;
out:
    texts_free(&a);
    texts_free(&b);
    return result;
}

static PyObject *pipeline_embed(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts",   "pairs",     "truncate",   "truncate_left", "max_length",
                             "pooling", "normalize", "dimensions", "prompt_name", "prompt", NULL};
    PyObject *texts_o, *pairs_o = Py_None;
    int truncate = 1, left = 0, pooling = BERT8_POOLING_DEFAULT, normalize = -1;
    long long max_length = 0, dims = 0;
    const char *prompt_name = NULL, *prompt = NULL;
    Py_ssize_t prompt_len = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OppLiiLzz#", kwlist, &texts_o, &pairs_o, &truncate, &left,
                                     &max_length, &pooling, &normalize, &dims, &prompt_name, &prompt, &prompt_len))
        return NULL;
    if (!pipeline_ready(p)) return NULL;
    texts a, b = {0};
    if (texts_get(texts_o, 0, &a, "texts") < 0) return NULL;
    PyObject *result = NULL;
    if (pairs_o != Py_None) {
        if (texts_get(pairs_o, 1, &b, "text_pair") < 0) goto out;
        if (b.n != a.n) {
            PyErr_Format(PyExc_ValueError, "text_pair has %zd entries for %zd texts", b.n, a.n);
            goto out;
        }
    }
    const bert8_pipeline_info *in = bert8_pipeline_get_info(p->p);
    if (dims < 0 || dims > in->dim) {
        PyErr_Format(PyExc_ValueError, "dimensions must be in [1, %lld]", (long long)in->dim);
        goto out;
    }
    int64_t shape[2] = {a.n, dims ? dims : in->dim};
    float *vec = NULL;
    PyObject *buf = buffer_alloc('f', 2, shape, (void **)&vec);
    if (!buf) goto out;
    bert8_run_options o = run_options(truncate, left, max_length);
    bert8_embed_options eo = bert8_default_embed_options();
    eo.pooling = (bert8_pooling)pooling;
    eo.normalize = normalize;
    eo.dimensions = dims;
    eo.prompt_name = prompt_name;
    if (prompt) eo.prompt = (bert8_text){prompt, (size_t)prompt_len};
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_embed(p->p, a.n, a.t, b.tuple ? b.t : NULL, &o, &eo, vec, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BERT8_OK) {
        Py_DECREF(buf);
        raise_status(st, err);
        goto out;
    }
    result = buf;
out:
    texts_free(&a);
    texts_free(&b);
    return result;
}

/* TokenEmbeddings: owns a bert8_token_embeddings that Buffers view. */
typedef struct {
    PyObject_HEAD
    bert8_token_embeddings te;
} TokenEmbeddings;

static void token_embeddings_dealloc(TokenEmbeddings *t) {
    bert8_token_embeddings_free(&t->te);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyTypeObject TokenEmbeddingsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bert8._bert8.TokenEmbeddings",
    .tp_basicsize = sizeof(TokenEmbeddings),
    .tp_dealloc = (destructor)token_embeddings_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Per-token hidden states of one embed_tokens call, viewed by Buffers.",
};

static PyObject *pipeline_embed_tokens(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts", "truncate", "truncate_left", "max_length", NULL};
    PyObject *texts_o;
    int truncate = 1, left = 0;
    long long max_length = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|ppL", kwlist, &texts_o, &truncate, &left, &max_length)) return NULL;
    if (!pipeline_ready(p)) return NULL;
    texts a;
    if (texts_get(texts_o, 0, &a, "texts") < 0) return NULL;
    PyObject *result = NULL;
    TokenEmbeddings *te = PyObject_New(TokenEmbeddings, &TokenEmbeddingsType);
    if (!te) goto out;
    memset(&te->te, 0, sizeof te->te);
    bert8_run_options o = run_options(truncate, left, max_length);
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_embed_tokens(p->p, a.n, a.t, &o, &te->te, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BERT8_OK) {
        raise_status(st, err);
        goto out;
    }
    int64_t n1 = te->te.n + 1, shape[2] = {te->te.offsets[te->te.n], te->te.dim};
    result = Py_BuildValue("(NN)", buffer_new((void *)te->te.offsets, NULL, (PyObject *)te, 'q', 1, &n1),
                           buffer_new((void *)te->te.data, NULL, (PyObject *)te, 'f', 2, shape));
out:
    Py_XDECREF(te);
    texts_free(&a);
    return result;
}

static PyObject *pipeline_rerank(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"query", "texts", "truncate", "truncate_left", "max_length", "raw_scores", NULL};
    PyObject *query_o, *texts_o;
    int truncate = 1, left = 0, raw = 0;
    long long max_length = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|ppLp", kwlist, &query_o, &texts_o, &truncate, &left, &max_length,
                                     &raw))
        return NULL;
    if (!pipeline_ready(p)) return NULL;
    bert8_text q;
    if (text_get(query_o, &q, "query") < 0) return NULL;
    texts a;
    if (texts_get(texts_o, 0, &a, "documents") < 0) return NULL;
    PyObject *result = NULL, *sb = NULL, *ob = NULL;
    int64_t n = a.n;
    float *scores = NULL;
    int64_t *order = NULL;
    if (!(sb = buffer_alloc('f', 1, &n, (void **)&scores)) || !(ob = buffer_alloc('q', 1, &n, (void **)&order)))
        goto out;
    bert8_run_options o = run_options(truncate, left, max_length);
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_rerank(p->p, q, a.n, a.t, &o, raw, scores, order, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BERT8_OK) {
        raise_status(st, err);
        goto out;
    }
    result = Py_BuildValue("(OO)", sb, ob);
out:
    Py_XDECREF(sb);
    Py_XDECREF(ob);
    texts_free(&a);
    return result;
}

static PyObject *pipeline_qa(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"questions", "contexts", "max_answer_len", "doc_stride", "max_length", "score_logits",
                             NULL};
    PyObject *q_o, *c_o;
    bert8_qa_options qo = bert8_default_qa_options();
    long long mal = qo.max_answer_len, ds = qo.doc_stride, ml = qo.max_length;
    int sl = qo.score_logits;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|LLLp", kwlist, &q_o, &c_o, &mal, &ds, &ml, &sl)) return NULL;
    if (!pipeline_ready(p)) return NULL;
    texts q, c = {0};
    if (texts_get(q_o, 0, &q, "question") < 0) return NULL;
    PyObject *result = NULL;
    bert8_qa_answer *ans = NULL;
    if (texts_get(c_o, 0, &c, "context") < 0) goto out;
    if (c.n != q.n) {
        PyErr_Format(PyExc_ValueError, "%zd questions for %zd contexts", q.n, c.n);
        goto out;
    }
    if (!(ans = PyMem_Calloc((size_t)q.n + 1, sizeof *ans))) {
        PyErr_NoMemory();
        goto out;
    }
    qo.max_answer_len = mal;
    qo.doc_stride = ds;
    qo.max_length = ml;
    qo.score_logits = sl;
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_qa(p->p, q.n, q.t, c.t, &qo, ans, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != BERT8_OK) {
        raise_status(st, err);
        goto out;
    }
    PyObject *list = PyList_New(q.n);
    for (Py_ssize_t i = 0; list && i < q.n; i++) {
        const bert8_qa_answer *x = &ans[i];
        PyObject *t = Py_BuildValue("(OdLLLL)", x->found ? Py_True : Py_False, x->score, (long long)x->start,
                                    (long long)x->end, (long long)x->start_char, (long long)x->end_char);
        if (!t) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, t);
    }
    result = list;
out:
    PyMem_Free(ans);
    texts_free(&q);
    texts_free(&c);
    return result;
}

/* Entities [off[i], off[i+1]) of each text as lists of tuples
 * (label, score, start, end, start_char, end_char, index). */
static PyObject *entity_lists(int64_t n, const int64_t *off, const bert8_entity *ents) {
    PyObject *outer = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; outer && i < n; i++) {
        PyObject *inner = PyList_New((Py_ssize_t)(off[i + 1] - off[i]));
        for (int64_t k = off[i]; inner && k < off[i + 1]; k++) {
            const bert8_entity *e = &ents[k];
            PyObject *t = Py_BuildValue("(sdLLLLL)", e->label ? e->label : "", (double)e->score, (long long)e->start,
                                        (long long)e->end, (long long)e->start_char, (long long)e->end_char,
                                        (long long)e->index);
            if (!t) Py_CLEAR(inner);
            else PyList_SET_ITEM(inner, (Py_ssize_t)(k - off[i]), t);
        }
        if (!inner) Py_CLEAR(outer);
        else PyList_SET_ITEM(outer, (Py_ssize_t)i, inner);
    }
    return outer;
}

static PyObject *pipeline_ner(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts", "aggregation", "stride", "keep_outside", NULL};
    PyObject *texts_o;
    bert8_ner_options no = bert8_default_ner_options();
    int agg = (int)no.aggregation, keep = no.keep_outside;
    long long stride = no.stride;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iLp", kwlist, &texts_o, &agg, &stride, &keep)) return NULL;
    if (!pipeline_ready(p)) return NULL;
    texts a;
    if (texts_get(texts_o, 0, &a, "texts") < 0) return NULL;
    no.aggregation = (bert8_aggregation)agg;
    no.stride = stride;
    no.keep_outside = keep;
    bert8_ner_result r = {0};
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_ner(p->p, a.n, a.t, &no, &r, err, sizeof err);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (st != BERT8_OK) raise_status(st, err);
    else result = Py_BuildValue("(NN)", entity_lists(r.n, r.entity_offsets, r.entities),
                                entity_lists(r.n, r.word_offsets, r.words));
    bert8_ner_result_free(&r);
    texts_free(&a);
    return result;
}

static PyObject *pipeline_fill_mask(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts", "top_k", "max_length", NULL};
    PyObject *texts_o;
    long long top_k = 5, max_length = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|LL", kwlist, &texts_o, &top_k, &max_length)) return NULL;
    if (!pipeline_ready(p)) return NULL;
    texts a;
    if (texts_get(texts_o, 0, &a, "texts") < 0) return NULL;
    bert8_run_options ro = bert8_default_run_options();
    ro.max_length = max_length;
    bert8_fill_mask_result r = {0};
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_fill_mask(p->p, a.n, a.t, &ro, top_k, &r, err, sizeof err);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (st != BERT8_OK) {
        raise_status(st, err);
    } else if ((result = PyList_New((Py_ssize_t)r.n))) {
        /* per text, per mask: a list of (score, token, token_str, sequence) */
        for (int64_t i = 0; result && i < r.n; i++) {
            const int64_t m0 = r.mask_offsets[i], m1 = r.mask_offsets[i + 1];
            PyObject *masks = PyList_New((Py_ssize_t)(m1 - m0));
            for (int64_t m = m0; masks && m < m1; m++) {
                PyObject *preds = PyList_New((Py_ssize_t)r.top_k);
                for (int64_t j = 0; preds && j < r.top_k; j++) {
                    const bert8_fill_mask_pred *pr = &r.preds[m * r.top_k + j];
                    PyObject *t = Py_BuildValue("(dlss)", (double)pr->score, (long)pr->token, pr->token_str, pr->sequence);
                    if (!t) Py_CLEAR(preds);
                    else PyList_SET_ITEM(preds, (Py_ssize_t)j, t);
                }
                if (!preds) Py_CLEAR(masks);
                else PyList_SET_ITEM(masks, (Py_ssize_t)(m - m0), preds);
            }
            if (!masks) Py_CLEAR(result);
            else PyList_SET_ITEM(result, (Py_ssize_t)i, masks);
        }
    }
    bert8_fill_mask_result_free(&r);
    texts_free(&a);
    return result;
}

static PyObject *pipeline_embed_sparse(Pipeline *p, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"texts", "truncate", "max_length", NULL};
    PyObject *texts_o;
    int truncate = 1;
    long long max_length = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pL", kwlist, &texts_o, &truncate, &max_length)) return NULL;
    if (!pipeline_ready(p)) return NULL;
    texts a;
    if (texts_get(texts_o, 0, &a, "texts") < 0) return NULL;
    bert8_run_options ro = bert8_default_run_options();
    ro.truncate = truncate;
    ro.max_length = max_length;
    bert8_sparse_embeddings r = {0};
    char err[ERR_LEN] = "";
    bert8_status st;
    int threads = p->threads;
    Py_BEGIN_ALLOW_THREADS
    bert8_set_threads(threads);
    st = bert8_embed_sparse(p->p, a.n, a.t, &ro, &r, err, sizeof err);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (st != BERT8_OK) {
        raise_status(st, err);
    } else {
        /* CSR: offsets [n + 1] (int64), indices (int32), values (float32), and the vocabulary size */
        int64_t n1 = r.n + 1, nnz = r.offsets[r.n];
        void *po = NULL, *pi = NULL, *pv = NULL;
        PyObject *o = buffer_alloc('q', 1, &n1, &po), *ix = buffer_alloc('i', 1, &nnz, &pi),
                 *v = buffer_alloc('f', 1, &nnz, &pv);
        if (o && ix && v) {
            memcpy(po, r.offsets, (size_t)n1 * sizeof(int64_t));
            memcpy(pi, r.indices, (size_t)nnz * sizeof(int32_t));
            memcpy(pv, r.values, (size_t)nnz * sizeof(float));
            result = Py_BuildValue("(NNNL)", o, ix, v, (long long)r.dim);
        } else {
            Py_XDECREF(o);
            Py_XDECREF(ix);
            Py_XDECREF(v);
        }
    }
    bert8_sparse_embeddings_free(&r);
    texts_free(&a);
    return result;
}

static PyMethodDef pipeline_methods[] = {
    {"info", (PyCFunction)pipeline_info, METH_NOARGS, "info() -> dict"},
    {"fill_mask", (PyCFunction)(void (*)(void))pipeline_fill_mask, METH_VARARGS | METH_KEYWORDS,
     "fill_mask(texts, top_k=5, max_length=0) -> per text, per mask, a list of (score, token, token_str, sequence)"},
    {"embed_sparse", (PyCFunction)(void (*)(void))pipeline_embed_sparse, METH_VARARGS | METH_KEYWORDS,
     "embed_sparse(texts, truncate=True, max_length=0) -> (offsets [n+1], indices, values, vocab_size): SPLADE"},
    {"label", (PyCFunction)pipeline_label, METH_O, "label(i) -> str or None"},
    {"classify", (PyCFunction)(void (*)(void))pipeline_classify, METH_VARARGS | METH_KEYWORDS,
     "classify(texts, pairs=None, truncate=True, truncate_left=False, max_length=0, score_fn=0) -> Buffer [n, labels]"},
    {"embed", (PyCFunction)(void (*)(void))pipeline_embed, METH_VARARGS | METH_KEYWORDS,
     "embed(texts, pairs=None, truncate=True, truncate_left=False, max_length=0, pooling=0, normalize=-1,"
     " dimensions=0, prompt_name=None, prompt=None) -> Buffer [n, dim]"},
    {"embed_tokens", (PyCFunction)(void (*)(void))pipeline_embed_tokens, METH_VARARGS | METH_KEYWORDS,
     "embed_tokens(texts, truncate=True, truncate_left=False, max_length=0) -> (offsets [n+1], data [rows, dim])"},
    {"rerank", (PyCFunction)(void (*)(void))pipeline_rerank, METH_VARARGS | METH_KEYWORDS,
     "rerank(query, texts, truncate=True, truncate_left=False, max_length=0, raw_scores=False) -> (scores, order)"},
    {"qa", (PyCFunction)(void (*)(void))pipeline_qa, METH_VARARGS | METH_KEYWORDS,
     "qa(questions, contexts, max_answer_len=30, doc_stride=-1, max_length=0, score_logits=False) -> list of "
     "(found, score, start, end, start_char, end_char)"},
    {"ner", (PyCFunction)(void (*)(void))pipeline_ner, METH_VARARGS | METH_KEYWORDS,
     "ner(texts, aggregation=2, stride=-1, keep_outside=False) -> (entities, words): per text, lists of "
     "(label, score, start, end, start_char, end_char, index)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject PipelineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bert8._bert8.Pipeline",
    .tp_basicsize = sizeof(Pipeline),
    .tp_dealloc = (destructor)pipeline_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Pipeline(path, threads=0, ...): a model and its tokenizer with the task logic (bert8_pipeline).",
    .tp_methods = pipeline_methods,
    .tp_init = (initproc)pipeline_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module ------------------------------------------------------------------------------- */

static PyObject *mod_version(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyUnicode_FromString(bert8_version());
}

static PyObject *mod_status_string(PyObject *self, PyObject *arg) {
    (void)self;
    long s = PyLong_AsLong(arg);
    if (s == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(bert8_status_string((bert8_status)s));
}

static PyObject *mod_physical_cores(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromLong(bert8_physical_cores());
}

static PyMethodDef module_methods[] = {
    {"version", mod_version, METH_NOARGS, "version() -> the C library's version string"},
    {"status_string", mod_status_string, METH_O, "status_string(status) -> str"},
    {"physical_cores", mod_physical_cores, METH_NOARGS, "physical_cores() -> int"},
    {"_set_error_type", set_error_type, METH_O, "installs the exception class bert8 errors are raised as"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_bert8",
                                        "bert8's C extension: the public C API for the Python package.", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bert8(void) {
    PyTypeObject *types[] = {&BufferType, &LeaseType,     &ModelType,          &TokenizerType,
                             &EncodingType, &PipelineType, &TokenEmbeddingsType};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Model", (PyObject *)&ModelType) < 0 ||
        PyModule_AddObjectRef(m, "Tokenizer", (PyObject *)&TokenizerType) < 0 ||
        PyModule_AddObjectRef(m, "Pipeline", (PyObject *)&PipelineType) < 0 ||
        PyModule_AddObjectRef(m, "Buffer", (PyObject *)&BufferType) < 0 ||
        PyModule_AddIntConstant(m, "STATUS_COUNT", BERT8_STATUS_COUNT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
