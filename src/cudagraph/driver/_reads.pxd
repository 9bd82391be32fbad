# cython: language_level=3
# Declarations of cudagraph.driver._reads, for compiled modules that cimport it (see _reads.pyx).

from cuda.bindings cimport cydriver

cpdef enum:
    # One value of each id: sizeof(CUlaunchAttributeValue) (checked against cuda.h when the module loads).
    VALUE_SIZE = 64
    # The most ids one reader asks (cudagraph asks CUlaunchAttributeID 1..23).
    MAX_IDS = 32
    # VALUE_SIZE in 8-byte words
    VALUE_WORDS = 8
    # Dependencies graph_order reads per node in one call at first (as graph_reader.DEPS_ROOM)
    DEPS_ROOM = 32


cdef class AttributeReads:
    # Set once by __cinit__ and never written after: a reader is shared by threads without a lock.
    cdef cydriver.CUkernelNodeAttrID _ids[MAX_IDS]
    cdef Py_ssize_t _count
    # 8-byte words, aligned for the union: count * VALUE_SIZE bytes used
    cdef unsigned long long _plain[MAX_IDS * VALUE_WORDS]
    cdef readonly tuple ids
    cdef readonly bytes plain
