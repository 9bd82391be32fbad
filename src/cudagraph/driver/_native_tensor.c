/*
 * Reading an exact torch.Tensor in C: a kernel argument's address (cg_tensor_pointer, the packer's kind 'T';
 * Python twin: kernel_args._tensor_address), and for the compiled Executable._bind_many (_native_bind_many.c)
 * its address and layout: the items of the layout key bind_checks._torch_tensor (its twin) makes, (dtype, shape,
 * stride(), is_cuda, get_device()), plus requires_grad for _torch_resolved's key.
 *
 * The layout is read in one of two ways, giving the same items:
 *   - through DLPack's C exchange API where the tensor's type offers it (`__dlpack_c_exchange_api__`, a
 *     capsule named "dlpack_exchange_api" on torch.Tensor since PyTorch 2.10): one C call,
 *     dltensor_from_py_object_no_sync, fills a DLTensor (address, device, shape, strides) without Python
 *     code, and only the dtype (and requires_grad) is read through torch's getters;
 *   - else through the seven getters themselves (data_ptr(), dtype, shape, stride(), is_cuda, get_device(),
 *     requires_grad).
 * DLPack is the faster of the two (bench/rebind_lifted_cpu.py, getters against DLPack; bench/cpu_overhead.py).
 *
 * The DLPack structures below are the ABI of DLPack 1.x (dlpack.h: DLDevice, DLDataType, DLTensor,
 * DLPackExchangeAPIHeader, DLPackExchangeAPI), declared here with the fields read.
 */
#include "_native.h"

enum { DL_CPU = 1, DL_CUDA = 2 }; /* DLDeviceType's kDLCPU and kDLCUDA */

typedef struct {
    int32_t device_type; /* a DLDeviceType (a C enum) */
    int32_t device_id;
} dl_device;

typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} dl_dtype;

typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape, *strides; /* strides in elements; NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_api_header {
    uint32_t major, minor;          /* DLPackVersion */
    struct dl_api_header *prev_api; /* an older table, or NULL */
} dl_api_header;

typedef struct {
    dl_api_header header;
    void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync, *managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void *py_object, dl_tensor *out); /* 0, or -1 with an exception set */
    void *current_work_stream;
} dl_api;

static PyObject *api_capsule; /* the capsule api_table was read from (held: its identity is the cache's key) */
static const void *api_table;

const void *
cg_dlpack_api(PyTypeObject *type)
{
    static PyObject *name;
    if (name == NULL && (name = PyUnicode_InternFromString("__dlpack_c_exchange_api__")) == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *cap = _PyType_Lookup(type, name); /* (borrowed; a look-up in the type's MRO, no Python code) */
    if (cap == NULL || cap == api_capsule)
        return cap == NULL ? NULL : api_table;
    const dl_api_header *h = NULL;
    if (PyCapsule_IsValid(cap, "dlpack_exchange_api"))
        h = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
    while (h != NULL && h->major != 1) /* a newer table may chain to the 1.x one this reads */
        h = h->prev_api;
    if (h != NULL && ((const dl_api *)h)->dltensor_from_py_object_no_sync == NULL)
        h = NULL;
    PyErr_Clear();
    PyObject *old = api_capsule;
    api_capsule = Py_NewRef(cap), api_table = h;
    Py_XDECREF(old);
    return h;
}

void
cg_tensor_layout_release(cg_tensor_layout *l)
{
    Py_CLEAR(l->address);
    Py_CLEAR(l->dtype);
    Py_CLEAR(l->grad);
    Py_CLEAR(l->is_cuda);
}

/* `seq` (a tuple or tuple subclass such as torch.Size, of exact ints) into `to`: its length, or -1. */
static int
read_dims(PyObject *seq, int64_t *to)
{
    if (seq == NULL || !PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) > CG_TENSOR_DIMS)
        return -1;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(seq); k++) {
        PyObject *item = PyTuple_GET_ITEM(seq, k);
        int overflow = 0;
        if (!PyLong_CheckExact(item) || (to[k] = PyLong_AsLongLongAndOverflow(item, &overflow), overflow))
            return -1;
    }
    return (int)PyTuple_GET_SIZE(seq);
}

/* The layout through the getters (`reads`: bind_checks.TORCH_READS): 1, or 0 (declined). */
static int
read_by_getters(PyObject *reads, PyObject *t, int grad, cg_tensor_layout *out)
{
    static const int called[7] = {1, 0, 0, 1, 0, 1, 0};
    PyObject *got[7] = {NULL};
    int ok = 1;
    for (int k = 0; ok && k < 6 + grad; k++) {
        PyObject *name = PyTuple_GET_ITEM(reads, k);
        got[k] = called[k] ? PyObject_CallMethodNoArgs(t, name) : PyObject_GetAttr(t, name);
        ok = got[k] != NULL;
    }
    int overflow = 0;
    if (ok && PyLong_CheckExact(got[0]) && PyLong_CheckExact(got[5]) && (got[4] == Py_True || got[4] == Py_False)) {
        out->device = PyLong_AsLongLongAndOverflow(got[5], &overflow);
        out->ndim = read_dims(got[2], out->shape);
        ok = !overflow && out->ndim >= 0 && read_dims(got[3], out->strides) == out->ndim;
    } else
        ok = 0;
    if (ok) { /* (held: moved into `out`) */
        out->address = got[0], out->dtype = got[1], out->is_cuda = got[4], out->grad = got[6];
        got[0] = got[1] = got[4] = got[6] = NULL;
    }
    for (int k = 0; k < 7; k++)
        Py_XDECREF(got[k]);
    return ok;
}

/* The layout through DLPack's dltensor_from_py_object_no_sync: 1, or 0 (declined). */
static int
read_by_dlpack(const dl_api *api, PyObject *reads, PyObject *t, int grad, cg_tensor_layout *out)
{
    dl_tensor dl;
    out->dtype = PyObject_GetAttr(t, PyTuple_GET_ITEM(reads, 1));
    if (out->dtype == NULL || (grad && (out->grad = PyObject_GetAttr(t, PyTuple_GET_ITEM(reads, 6))) == NULL))
        return 0;
    /* No Python code runs from this call to the copies below: `dl` points into the tensor (held by the caller). */
    if (api->dltensor_from_py_object_no_sync(t, &dl) != 0 || dl.ndim < 0 || dl.ndim > CG_TENSOR_DIMS ||
        (dl.ndim > 0 && (dl.shape == NULL || dl.strides == NULL)))
        return 0;
    if (dl.device.device_type == DL_CUDA) /* is_cuda and get_device() as torch says them */
        out->is_cuda = Py_NewRef(Py_True), out->device = dl.device.device_id;
    else if (dl.device.device_type == DL_CPU)
        out->is_cuda = Py_NewRef(Py_False), out->device = -1;
    else
        return 0;
    out->ndim = dl.ndim;
    if (dl.ndim > 0) {
        memcpy(out->shape, dl.shape, (size_t)dl.ndim * sizeof(int64_t));
        memcpy(out->strides, dl.strides, (size_t)dl.ndim * sizeof(int64_t));
    }
    out->address = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)dl.data + dl.byte_offset);
    return out->address != NULL;
}

int
cg_tensor_read(const void *api, PyObject *reads, PyObject *t, int grad, cg_tensor_layout *out)
{
    memset(out, 0, sizeof *out);
    int ok = api != NULL ? read_by_dlpack(api, reads, t, grad, out) : read_by_getters(reads, t, grad, out);
    if (!ok)
        cg_tensor_layout_release(out);
    PyErr_Clear();
    return ok;
}

/* Whether the exact ints of `seq` (a tuple or tuple subclass) are the `n` values `v`. Runs no Python code. */
static int
same_dims(PyObject *seq, const int64_t *v, int n)
{
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n)
        return 0;
    for (int k = 0; k < n; k++) {
        PyObject *item = PyTuple_GET_ITEM(seq, k);
        int overflow = 0;
        if (!PyLong_CheckExact(item) || PyLong_AsLongLongAndOverflow(item, &overflow) != v[k] || overflow)
            return 0;
    }
    return 1;
}

int
cg_tensor_key_is(PyObject *key, const cg_tensor_layout *l, int grad)
{
    int overflow = 0;
    return PyTuple_CheckExact(key) && PyTuple_GET_SIZE(key) == 5 + grad && PyTuple_GET_ITEM(key, 0) == l->dtype &&
           same_dims(PyTuple_GET_ITEM(key, 1), l->shape, l->ndim) &&
           same_dims(PyTuple_GET_ITEM(key, 2), l->strides, l->ndim) && PyTuple_GET_ITEM(key, 3) == l->is_cuda &&
           PyLong_CheckExact(PyTuple_GET_ITEM(key, 4)) &&
           PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(key, 4), &overflow) == l->device && !overflow &&
           (!grad || PyTuple_GET_ITEM(key, 5) == l->grad);
}

/* ------------------------------------------------------------------ a kernel argument's address (kind 'T') */

static PyObject *str_requires_grad;

int
cg_tensor_pointer(PyObject *t, char *to)
{
    const dl_api *api = cg_dlpack_api(Py_TYPE(t));
    if (api == NULL || (str_requires_grad == NULL && (str_requires_grad = PyUnicode_InternFromString("requires_grad"))
                                                           == NULL)) {
        PyErr_Clear();
        return 0;
    }
    PyObject *grad = PyObject_GetAttr(t, str_requires_grad);
    int ok = grad == Py_False; /* (one that requires grad: the Python packer refuses it, naming the argument) */
    Py_XDECREF(grad);
    dl_tensor dl;
    ok = ok && api->dltensor_from_py_object_no_sync(t, &dl) == 0 && dl.device.device_type == DL_CUDA &&
         dl.ndim >= 0 && dl.ndim <= CG_TENSOR_DIMS && (dl.ndim == 0 || dl.shape != NULL);
    PyErr_Clear();
    if (!ok)
        return 0;
    unsigned long long address = (unsigned long long)(uintptr_t)dl.data + dl.byte_offset;
    for (int k = 0; k < dl.ndim; k++)
        if (dl.shape[k] == 0) /* no elements: the address 0, as the tensor's __cuda_array_interface__ gives */
            address = 0;
    memcpy(to, &address, sizeof address);
    return 1;
}
