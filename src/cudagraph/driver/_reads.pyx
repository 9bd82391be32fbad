# cython: language_level=3
# cython: freethreading_compatible = True
# distutils: language = c++
"""Kernel node launch attributes read in compiled code (the first module of the compiled core).

:class:`AttributeReads` asks the driver, for one kernel node, each ``CUlaunchAttributeID`` it was given
(``cuGraphKernelNodeGetAttribute`` through ``cuda.bindings.cydriver``, every call of a node inside one
``with nogil`` block) into a C buffer of 64 bytes per id, and compares the whole buffer with the values
of a node never given any attribute.

Its Python twin, the reference, is the ctypes loop of
:meth:`cudagraph.driver.node_reads.NodeReads.attributes`; ``NodeReads`` chooses between them, turns the
values into ``{id: bytes}``, prunes refused ids (by making a new reader) and names errors.

GIL stance (free-threaded Python): a reader's state is set once by ``__cinit__`` and only read after;
each read works in a buffer on its own stack. Readers are shared by threads without a lock.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport uintptr_t
from libc.string cimport memcmp, memcpy, memset

from cuda.bindings cimport cydriver

__all__ = ["AttributeReadError", "AttributeReads", "MAX_IDS", "VALUE_SIZE"]

if sizeof(cydriver.CUkernelNodeAttrValue) != VALUE_SIZE:  # the real cuda.h union, as built against
    raise ImportError(
        f"cudagraph.driver._reads: sizeof(CUkernelNodeAttrValue) is {sizeof(cydriver.CUkernelNodeAttrValue)}, "
        f"not {VALUE_SIZE}"
    )


class AttributeReadError(RuntimeError):
    """The driver refused a read for another reason than an id it does not take for graph kernel nodes.

    Attributes
    ----------
    result : int
        The ``CUresult``.
    attribute : int
        The ``CUlaunchAttributeID`` asked.
    """

    def __init__(self, result, attribute):
        super().__init__(result, attribute)
        self.result = result
        self.attribute = attribute


#: What :meth:`AttributeReads.read` returns for a node whose every value is the plain one (no object made).
cdef tuple _PLAIN_NODE = (None, ())


cdef class AttributeReads:
    """Reads the launch attribute ids ``ids`` of kernel nodes.

    Parameters
    ----------
    ids : sequence of int
        The ``CUlaunchAttributeID`` values to ask, in order (at most ``MAX_IDS``).
    plain : bytes
        ``64 * len(ids)`` bytes: the values of a kernel node never given any attribute, in the order of ``ids``.
    """

    def __cinit__(self, ids, bytes plain):
        cdef tuple asked = tuple(int(i) for i in ids)
        cdef Py_ssize_t n = len(asked)
        if n > MAX_IDS:
            raise ValueError(f"AttributeReads: {n} ids, at most {MAX_IDS}")
        if len(plain) != n * VALUE_SIZE:
            raise ValueError(f"AttributeReads: plain is {len(plain)} bytes, not {n * VALUE_SIZE} ({n} ids)")
        cdef Py_ssize_t k
        for k in range(n):
            self._ids[k] = <cydriver.CUkernelNodeAttrID><int>asked[k]
        memset(self._plain, 0, sizeof(self._plain))
        if n:
            memcpy(self._plain, <const char*>plain, n * VALUE_SIZE)
        self._count = n
        self.ids = asked
        self.plain = plain

    def read(self, node):
        """The values of kernel node ``node`` (a handle as an int) and the ids the driver refused.

        Returns
        -------
        tuple of (bytes or None, tuple of int)
            ``(None, ())`` when every id was answered with the plain value; else the ``64 * len(ids)``
            bytes read (a refused id's 64 bytes are zero) and the ids refused with
            ``CUDA_ERROR_INVALID_VALUE`` or ``CUDA_ERROR_NOT_SUPPORTED``, in order.

        Raises
        ------
        AttributeReadError
            Any other ``CUresult`` (the first; the ids after it are not asked).
        """
        cdef cydriver.CUgraphNode handle = <cydriver.CUgraphNode><uintptr_t>node
        cdef unsigned long long values[MAX_IDS * VALUE_WORDS]
        cdef char* base = <char*>values
        cdef int refused[MAX_IDS]
        cdef Py_ssize_t n_refused = 0
        cdef Py_ssize_t count = self._count
        cdef Py_ssize_t k
        cdef cydriver.CUresult rc
        cdef cydriver.CUresult failed = cydriver.CUresult.CUDA_SUCCESS
        cdef int failed_id = 0
        with nogil:
            memset(base, 0, count * VALUE_SIZE)
            for k in range(count):
                rc = cydriver.cuGraphKernelNodeGetAttribute(
                    handle, self._ids[k], <cydriver.CUkernelNodeAttrValue*>(base + k * VALUE_SIZE)
                )
                if rc == cydriver.CUresult.CUDA_SUCCESS:
                    continue
                if rc == cydriver.CUresult.CUDA_ERROR_INVALID_VALUE or rc == cydriver.CUresult.CUDA_ERROR_NOT_SUPPORTED:
                    refused[n_refused] = <int>self._ids[k]
                    n_refused += 1
                    continue
                failed = rc
                failed_id = <int>self._ids[k]
                break
        if failed != cydriver.CUresult.CUDA_SUCCESS:
            raise AttributeReadError(<int>failed, failed_id)
        if n_refused == 0 and memcmp(base, self._plain, count * VALUE_SIZE) == 0:
            return _PLAIN_NODE
        raw = PyBytes_FromStringAndSize(base, count * VALUE_SIZE)
        return raw, tuple([refused[k] for k in range(n_refused)])

    def __repr__(self):
        return f"AttributeReads(ids={self.ids!r})"
