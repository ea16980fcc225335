/*
 * collection.c: ember._ember.Collection, one ember_collection: create from
 * the Python layer's table and feature tuples, forward and backward on
 * caller-owned arrays, row and optimizer-state access, checkpoints, stats.
 *
 * Every library call runs with the GIL released.  A collection is used by
 * one thread at a time: a call that finds another one running raises
 * ember.Error rather than racing (the busy flag is read and set under the
 * GIL, so the check cannot race either).  close() frees the collection;
 * every later call raises ember.Error.
 */
#include <stdlib.h>
#include <string.h>

#include "ember_py.h"

typedef struct py_collection {
    PyObject_HEAD
    ember_collection *coll;
    int busy;
    int32_t num_tables, num_features;
    int32_t *dims;               /* per table                               */
    ember_optimizer_kind *kinds; /* per table                               */
    int pending;                 /* a forward succeeded, no backward since  */
    unsigned long forward_thread; /* the thread of that forward             */
    int64_t last_pooled, last_sequence; /* floats that forward wrote: what
                                           backward's gradients must hold  */
} py_collection;

static void collection_free_parts(py_collection *self)
{
    if (self->coll)
        ember_collection_destroy(self->coll);
    self->coll = NULL;
    free(self->dims);
    free(self->kinds);
    self->dims = NULL;
    self->kinds = NULL;
    self->num_tables = self->num_features = 0;
}

/* (name, rows, dim, init, init_value, optimizer kind, lr, eps, weight_decay,
 *  beta1, beta2, placement, owner, kind, capacity, admit_after, evict,
 *  ttl_steps, storage, cache_bytes, path, max_ids, max_unique,
 *  limit_policy, exchange, precision, rounding, state_precision, momentum,
 *  nesterov, weight_decay_mode, beta, l1, l2, lr_power, clip_value,
 *  clip_norm, eta): the order of
 *  TableConfig._tuple (ember/config.py).
 * Strings point into the tuple's str objects: ember_collection_create copies
 * what it keeps, so they need to live only through the call. */
static int parse_table(PyObject *tuple, ember_table_config *t)
{
    const char *name, *path;
    int init, opt, placement, kind, evict, storage, limit_policy, exchange, precision, rounding, state_precision,
        decay_mode;
    *t = ember_table_config_default();
    if (!PyArg_ParseTuple(tuple, "sLiififffffiiiLiiiiLzLLiiiiifiifffffff;a table tuple", &name, &t->rows, &t->dim, &init,
                          &t->init_value, &opt, &t->optimizer.lr, &t->optimizer.eps, &t->optimizer.weight_decay,
                          &t->optimizer.beta1, &t->optimizer.beta2, &placement, &t->owner, &kind, &t->capacity,
                          &t->admit_after, &evict, &t->ttl_steps, &storage, &t->cache_bytes, &path,
                          &t->max_ids_per_partition, &t->max_unique_ids_per_partition, &limit_policy, &exchange,
                          &precision, &rounding, &state_precision, &t->optimizer.momentum, &t->optimizer.nesterov, &decay_mode, &t->optimizer.beta,
                          &t->optimizer.l1, &t->optimizer.l2, &t->optimizer.lr_power, &t->optimizer.clip_value,
                          &t->optimizer.clip_norm, &t->optimizer.eta))
        return -1;
    t->init = (ember_init_kind)init;
    t->optimizer.kind = (ember_optimizer_kind)opt;
    t->optimizer.weight_decay_mode = (ember_decay_mode)decay_mode;
    t->placement = (ember_placement)placement;
    t->kind = (ember_table_kind)kind;
    t->evict = (ember_evict_policy)evict;
    t->storage = (ember_storage)storage;
    t->limit_policy = (ember_limit_policy)limit_policy;
    t->exchange = (ember_exchange)exchange;
    t->precision = (ember_row_precision)precision;
    t->rounding = (ember_rounding)rounding;
    t->state_precision = (ember_row_precision)state_precision;
    t->name = name;
    t->path = path;
    return 0;
}

static int parse_feature(PyObject *tuple, ember_feature_config *f)
{
    const char *name;
    int combiner;
    if (!PyArg_ParseTuple(tuple, "sii;a feature tuple", &name, &f->table, &combiner))
        return -1;
    f->combiner = (ember_combiner)combiner;
    f->name = name;
    return 0;
}

static int collection_init(PyObject *obj, PyObject *args, PyObject *kwargs)
{
    py_collection *self = (py_collection *)obj;
    static char *kwlist[] = {"tables", "features", "seed", "threads", "dedup", "bounds", "stack_tables",
                             "debug_checks", "ssd_dir", "memory_budget", "ssd_min_bytes", "ssd_cache_bytes",
                             "world", NULL};
    PyObject *tables, *features, *world = Py_None;
    ember_collection_config cfg = ember_collection_config_default();
    unsigned long long seed = cfg.seed;
    int bounds = 0;
    const char *ssd_dir = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!|KiiiiizLLLO", kwlist, &PyTuple_Type, &tables,
                                     &PyTuple_Type, &features, &seed, &cfg.threads, &cfg.dedup, &bounds,
                                     &cfg.stack_tables, &cfg.debug_checks, &ssd_dir, &cfg.memory_budget,
                                     &cfg.ssd_min_bytes, &cfg.ssd_cache_bytes, &world))
        return -1;
    if (self->coll) {
        PyErr_SetString(PyExc_TypeError, "Collection: already initialised");
        return -1;
    }
    cfg.seed = seed;
    cfg.bounds = (ember_bounds_policy)bounds;
    if (world != Py_None) {
        cfg.world = PyCapsule_GetPointer(world, "ember.world");
        if (!cfg.world)
            return -1;
    }
    Py_ssize_t nt = PyTuple_Size(tables), nf = PyTuple_Size(features);
    if (nt < 1 || nf < 1 || nt > INT32_MAX || nf > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "Collection: at least one table and one feature are needed");
        return -1;
    }
    ember_table_config *tcfg = calloc((size_t)nt, sizeof *tcfg);
    ember_feature_config *fcfg = calloc((size_t)nf, sizeof *fcfg);
    self->dims = calloc((size_t)nt, sizeof *self->dims);
    self->kinds = calloc((size_t)nt, sizeof *self->kinds);
    int rc = -1;
    if (!tcfg || !fcfg || !self->dims || !self->kinds) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        if (parse_table(PyTuple_GetItem(tables, i), &tcfg[i]))
            goto out;
        self->dims[i] = tcfg[i].dim;
        self->kinds[i] = tcfg[i].optimizer.kind;
    }
    for (Py_ssize_t i = 0; i < nf; i++)
        if (parse_feature(PyTuple_GetItem(features, i), &fcfg[i]))
            goto out;
    cfg.ssd_dir = ssd_dir;
    cfg.tables = tcfg;
    cfg.num_tables = (int32_t)nt;
    cfg.features = fcfg;
    cfg.num_features = (int32_t)nf;
    ember_collection *coll = NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_collection_create(&cfg, &coll);
    Py_END_ALLOW_THREADS
    if (status) {
        ember_py_raise(status, ember_errmsg(NULL));
        goto out;
    }
    self->coll = coll;
    self->num_tables = (int32_t)nt;
    self->num_features = (int32_t)nf;
    rc = 0;
out:
    free(tcfg);
    free(fcfg);
    if (rc)
        collection_free_parts(self);
    return rc;
}

static void collection_dealloc(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    collection_free_parts((py_collection *)obj);
    py_free_object(obj, tp);
}

/* Claims the collection for one call: ember.Error when closed or busy. */
static int claim(py_collection *self)
{
    return py_claim(&self->busy, self->coll != NULL, "collection");
}

/* Ends a call: None, or ember.Error with the collection's message. */
static PyObject *finish(py_collection *self, int status)
{
    self->busy = 0;
    if (status)
        return ember_py_raise(status, ember_errmsg(self->coll));
    Py_RETURN_NONE;
}

static int check_table(py_collection *self, int table)
{
    if (table < 0 || table >= self->num_tables) {
        PyErr_Format(PyExc_IndexError, "table %d: the collection has tables 0..%d", table, self->num_tables - 1);
        return -1;
    }
    return 0;
}

/* A batch from its arrays; the caller releases them. */
static int get_batch(py_collection *self, int batch_size, PyObject *lengths_obj, PyObject *ids_obj,
                     PyObject *weights_obj, py_array *lengths, py_array *ids, py_array *weights, ember_batch *b)
{
    if (py_array_get(lengths_obj, "lengths", PY_INT32, 0, 0, lengths) ||
        py_array_get(ids_obj, "values", PY_INT64, 0, 0, ids) ||
        py_array_get(weights_obj, "weights", PY_FLOAT32, 0, 1, weights))
        return -1;
    if (batch_size < 0) {
        PyErr_Format(PyExc_ValueError, "batch_size: %d is negative", batch_size);
        return -1;
    }
    if (lengths->count != (Py_ssize_t)self->num_features * batch_size) {
        PyErr_Format(PyExc_ValueError, "lengths: %zd entries, but %d features x %d samples need %zd",
                     lengths->count, self->num_features, batch_size, (Py_ssize_t)self->num_features * batch_size);
        return -1;
    }
    if (weights_obj != Py_None && weights->count != ids->count) {
        PyErr_Format(PyExc_ValueError, "weights: %zd entries, but there are %zd values", weights->count, ids->count);
        return -1;
    }
    b->batch_size = batch_size;
    b->num_features = self->num_features;
    b->lengths = lengths->data;
    b->ids = ids->data;
    b->weights = weights->data;
    b->num_ids = ids->count;
    return 0;
}

static PyObject *collection_forward(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    int batch_size;
    PyObject *lo, *io, *wo, *po, *so;
    if (!PyArg_ParseTuple(args, "iOOOOO", &batch_size, &lo, &io, &wo, &po, &so) || claim(self))
        return NULL;
    py_array lengths = {0}, ids = {0}, weights = {0}, pooled = {0}, sequence = {0};
    ember_batch b;
    PyObject *ret = NULL;
    if (get_batch(self, batch_size, lo, io, wo, &lengths, &ids, &weights, &b) ||
        py_array_get(po, "out", PY_FLOAT32, 1, 0, &pooled) || py_array_get(so, "sequence", PY_FLOAT32, 1, 1, &sequence))
        goto out;
    int64_t width = ember_pooled_width(self->coll);
    if (pooled.count != (Py_ssize_t)(width * batch_size)) {
        PyErr_Format(PyExc_ValueError, "out: %zd floats, but %d samples x %lld pooled floats need %lld", pooled.count,
                     batch_size, (long long)width, (long long)width * batch_size);
        goto out;
    }
    int64_t seq = ember_sequence_size(self->coll, &b);
    if (seq > 0 && sequence.count != (Py_ssize_t)seq) {
        PyErr_Format(PyExc_ValueError, "sequence: %zd floats, but the batch's sequence features need %lld",
                     sequence.count, (long long)seq);
        goto out;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_forward(self->coll, &b, pooled.data, sequence.data);
    Py_END_ALLOW_THREADS
    self->pending = status == 0;
    self->forward_thread = PyThread_get_thread_ident();
    self->last_pooled = width * batch_size;
    self->last_sequence = seq > 0 ? seq : 0;
    ret = finish(self, status);
out:
    self->busy = 0;
    py_array_release(&lengths);
    py_array_release(&ids);
    py_array_release(&weights);
    py_array_release(&pooled);
    py_array_release(&sequence);
    return ret;
}

static PyObject *collection_sequence_size(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    int batch_size;
    PyObject *lo, *io;
    if (!PyArg_ParseTuple(args, "iOO", &batch_size, &lo, &io) || claim(self))
        return NULL;
    py_array lengths = {0}, ids = {0}, weights = {0};
    ember_batch b;
    PyObject *ret = NULL;
    if (!get_batch(self, batch_size, lo, io, Py_None, &lengths, &ids, &weights, &b))
        ret = PyLong_FromLongLong(ember_sequence_size(self->coll, &b));
    self->busy = 0;
    py_array_release(&lengths);
    py_array_release(&ids);
    return ret;
}

static PyObject *collection_backward(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    PyObject *po, *so;
    if (!PyArg_ParseTuple(args, "OO", &po, &so) || claim(self))
        return NULL;
    py_array d_pooled = {0}, d_sequence = {0};
    PyObject *ret = NULL;
    if (py_array_get(po, "grad", PY_FLOAT32, 0, 0, &d_pooled) ||
        py_array_get(so, "sequence_grad", PY_FLOAT32, 0, 1, &d_sequence))
        goto out;
    /* the gradients have the shapes of the last forward's outputs */
    if (!self->pending) {
        self->busy = 0;
        ember_py_raise(EMBER_ESTATE, "backward: no forward since the last backward (or the last forward failed)");
        goto out;
    }
    if (self->forward_thread != PyThread_get_thread_ident()) {
        self->busy = 0;
        ember_py_raise(EMBER_ESTATE, "backward: the last forward ran on another thread (a forward and its backward "
                                     "must come from one thread)");
        goto out;
    }
    if (d_pooled.count != (Py_ssize_t)self->last_pooled) {
        PyErr_Format(PyExc_ValueError, "grad: %zd floats, but the last forward's output has %lld", d_pooled.count,
                     (long long)self->last_pooled);
        goto out;
    }
    if (self->last_sequence && d_sequence.count != (Py_ssize_t)self->last_sequence) {
        PyErr_Format(PyExc_ValueError, "sequence_grad: %zd floats, but the last forward's sequence output has %lld",
                     d_sequence.count, (long long)self->last_sequence);
        goto out;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_backward(self->coll, d_pooled.data, d_sequence.data);
    Py_END_ALLOW_THREADS
    if (status == 0)
        self->pending = 0;
    ret = finish(self, status);
out:
    self->busy = 0;
    py_array_release(&d_pooled);
    py_array_release(&d_sequence);
    return ret;
}

/* read_rows / write_rows / read_state / write_state (table, first, count, array) */
static PyObject *row_access(PyObject *obj, PyObject *args, int state, int write)
{
    py_collection *self = (py_collection *)obj;
    int table;
    long long first, count;
    PyObject *ao;
    if (!PyArg_ParseTuple(args, "iLLO", &table, &first, &count, &ao) || claim(self))
        return NULL;
    if (check_table(self, table)) {
        self->busy = 0;
        return NULL;
    }
    py_array a = {0};
    PyObject *ret = NULL;
    if (py_array_get(ao, write ? "values" : "out", PY_FLOAT32, !write, 0, &a))
        goto out;
    int64_t per_row = state ? ember_state_floats(self->kinds[table], self->dims[table]) : self->dims[table];
    if (count < 0 || (per_row > 0 && count > PY_SSIZE_T_MAX / per_row) || a.count != (Py_ssize_t)(count * per_row)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd floats, but %lld rows of table %d need %lld", write ? "values" : "out",
                     a.count, count, table, count * (long long)per_row);
        goto out;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    if (state)
        status = write ? ember_table_write_state(self->coll, table, first, count, a.data)
                       : ember_table_read_state(self->coll, table, first, count, a.data);
    else
        status = write ? ember_table_write(self->coll, table, first, count, a.data)
                       : ember_table_read(self->coll, table, first, count, a.data);
    Py_END_ALLOW_THREADS
    ret = finish(self, status);
out:
    self->busy = 0;
    py_array_release(&a);
    return ret;
}

static PyObject *collection_read_rows(PyObject *o, PyObject *a) { return row_access(o, a, 0, 0); }
static PyObject *collection_write_rows(PyObject *o, PyObject *a) { return row_access(o, a, 0, 1); }
static PyObject *collection_read_state(PyObject *o, PyObject *a) { return row_access(o, a, 1, 0); }
static PyObject *collection_write_state(PyObject *o, PyObject *a) { return row_access(o, a, 1, 1); }

static PyObject *collection_state_floats(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    int table;
    if (!PyArg_ParseTuple(args, "i", &table))
        return NULL;
    if (!self->coll)
        return ember_py_raise(EMBER_ESTATE, "the collection is closed");
    if (check_table(self, table))
        return NULL;
    return PyLong_FromLong(ember_state_floats(self->kinds[table], self->dims[table]));
}

static PyObject *collection_pooled_width(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    if (claim(self))
        return NULL;
    self->busy = 0;
    return PyLong_FromLongLong(ember_pooled_width(self->coll));
}

static PyObject *collection_save(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    const char *root;
    long long step;
    int keep;
    if (!PyArg_ParseTuple(args, "sLi", &root, &step, &keep) || claim(self))
        return NULL;
    ember_save_options opt = {.step = step, .keep = keep};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = ember_save(self->coll, root, &opt);
    Py_END_ALLOW_THREADS
    return finish(self, status);
}

static PyObject *collection_load(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path) || claim(self))
        return NULL;
    ember_checkpoint *ck = NULL;
    int status, opened;
    Py_BEGIN_ALLOW_THREADS
    opened = ember_checkpoint_open(path, &ck);
    status = opened ? opened : ember_load(self->coll, ck);
    ember_checkpoint_close(ck);
    Py_END_ALLOW_THREADS
    if (opened) {
        self->busy = 0;
        return ember_py_raise(opened, ember_errmsg(NULL));
    }
    return finish(self, status);
}

static PyObject *collection_set(PyObject *obj, PyObject *args, int what)
{
    py_collection *self = (py_collection *)obj;
    double x = 0;
    int n = 0;
    if (!PyArg_ParseTuple(args, what == 0 ? "i" : "d", what == 0 ? (void *)&n : (void *)&x) || claim(self))
        return NULL;
    int status = what == 0 ? ember_collection_set_threads(self->coll, n)
                 : what == 1 ? ember_set_lr_scale(self->coll, (float)x)
                             : ember_collection_set_training(self->coll, x != 0);
    return finish(self, status);
}

static PyObject *collection_set_threads(PyObject *o, PyObject *a) { return collection_set(o, a, 0); }
static PyObject *collection_set_lr_scale(PyObject *o, PyObject *a) { return collection_set(o, a, 1); }
static PyObject *collection_set_training(PyObject *o, PyObject *a) { return collection_set(o, a, 2); }

static PyObject *collection_stats(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    if (claim(self))
        return NULL;
    self->busy = 0;
    ember_stats s;
    ember_memory m;
    ember_collection_stats(self->coll, &s);
    ember_collection_memory(self->coll, &m);
    return Py_BuildValue("{sLsLsLsLsLsLsLsLsdsLsLsLsisLsLsLsLsL}", "steps", (long long)s.steps, "dropped_bounds",
                         (long long)s.dropped_bounds, "dropped_limit", (long long)s.dropped_limit, "minibatches",
                         (long long)s.minibatches, "last_ids", (long long)s.last_ids, "last_unique_rows",
                         (long long)s.last_unique_rows, "last_bytes_sent", (long long)s.last_bytes_sent,
                         "last_bytes_received", (long long)s.last_bytes_received, "last_comm_seconds",
                         s.last_comm_seconds, "row_bytes", (long long)m.row_bytes, "state_bytes",
                         (long long)m.state_bytes, "workspace_bytes", (long long)m.workspace_bytes,
                         "physical_tables", (int)m.physical_tables, "cache_meta_bytes",
                         (long long)m.cache_meta_bytes, "disk_bytes", (long long)m.disk_bytes, "index_bytes",
                         (long long)m.index_bytes, "clipped_values", (long long)s.clipped_values, "clipped_rows",
                         (long long)s.clipped_rows);
}

static PyObject *collection_close(PyObject *obj, PyObject *args)
{
    py_collection *self = (py_collection *)obj;
    if (self->busy && claim(self)) /* another thread's call holds it: "in use" */
        return NULL;
    collection_free_parts(self);
    Py_RETURN_NONE;
}

static PyObject *collection_closed(PyObject *obj, void *closure)
{
    return PyBool_FromLong(((py_collection *)obj)->coll == NULL);
}

static PyMethodDef collection_methods[] = {
    {"forward", collection_forward, METH_VARARGS,
     "forward(batch_size, lengths, values, weights, out, sequence): ember_forward into out (and sequence)."},
    {"backward", collection_backward, METH_VARARGS,
     "backward(grad, sequence_grad): ember_backward, the fused optimizer step for the last forward."},
    {"sequence_size", collection_sequence_size, METH_VARARGS,
     "sequence_size(batch_size, lengths, values): floats of the sequence output."},
    {"pooled_width", collection_pooled_width, METH_NOARGS, "Floats per sample of the pooled output."},
    {"read_rows", collection_read_rows, METH_VARARGS, "read_rows(table, first, count, out)"},
    {"write_rows", collection_write_rows, METH_VARARGS, "write_rows(table, first, count, values)"},
    {"read_state", collection_read_state, METH_VARARGS, "read_state(table, first, count, out)"},
    {"write_state", collection_write_state, METH_VARARGS, "write_state(table, first, count, values)"},
    {"state_floats", collection_state_floats, METH_VARARGS, "state_floats(table): optimizer floats per row."},
    {"save", collection_save, METH_VARARGS, "save(root, step, keep): a checkpoint root/step-<step>."},
    {"load", collection_load, METH_VARARGS, "load(path): tables from a checkpoint root or step folder."},
    {"set_threads", collection_set_threads, METH_VARARGS, "set_threads(n)"},
    {"set_lr_scale", collection_set_lr_scale, METH_VARARGS, "set_lr_scale(scale)"},
    {"set_training", collection_set_training, METH_VARARGS, "set_training(flag)"},
    {"stats", collection_stats, METH_NOARGS, "Counters and memory, as a dict."},
    {"close", collection_close, METH_NOARGS, "Frees the tables; later calls raise ember.Error."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef collection_getset[] = {
    {"closed", collection_closed, NULL, "True after close().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot collection_slots[] = {
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, collection_init},
    {Py_tp_dealloc, collection_dealloc},
    {Py_tp_methods, collection_methods},
    {Py_tp_getset, collection_getset},
    {Py_tp_doc, "Collection(tables, features, **options): the C collection under ember.Collection."},
    {0, NULL},
};

static PyType_Spec collection_spec = {
    "ember._ember.Collection", sizeof(py_collection), 0, Py_TPFLAGS_DEFAULT, collection_slots,
};

int py_collection_register(PyObject *module)
{
    return py_add_type(module, &collection_spec, "Collection");
}
