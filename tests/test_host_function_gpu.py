"""C host functions on the GPU: a ctypes callback reads the data it is given, after the device work before it,
in an instantiated graph, an eager run and the capture backend; an executable's view and a whole update
change the data; cuda.core's ctypes callback program gives the same through cuda.core and compat."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

import cudagraph as cg

pytestmark = pytest.mark.gpu

CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
N = 16


def _reader(seen: list[Any], nbytes: int) -> Any:
    @CALLBACK
    def read(data: Any) -> None:
        seen.append(ctypes.string_at(data, nbytes) if data else None)

    return read


@pytest.mark.parametrize("backend", ["explicit", "capture", "eager"])
def test_a_ctypes_callback_reads_its_data_after_the_work_before_it(backend, gpu, stream):
    seen: list[Any] = []
    fn = _reader(seen, 4)
    host, view = gpu.pinned(4)
    g = cg.Graph("h")
    fill = g.memset(host, 0x5A, count=4)
    probe = _reader(seen, 4)
    g.host_function(probe, int(host.handle), after=fill)  # the caller's memory, as it is at that point
    g.host_function(fn, b"\x01\x02\x03\x04")
    if backend == "eager":
        g.run(stream)
    else:
        with g.instantiate(backend=backend) as exe:
            exe.launch(stream)
    stream.sync()
    assert sorted(seen) == [b"\x01\x02\x03\x04", b"\x5a" * 4] and bytes(view) == b"\x5a" * 4


def test_updates_change_what_the_function_reads(gpu, stream):
    seen: list[Any] = []
    fn, other = _reader(seen, 2), _reader(seen, 2)
    g = cg.Graph("h")
    n = g.host_function(fn, b"\x10\x11")
    exe = g.instantiate()
    exe.launch(stream)
    stream.sync()
    exe[n].update(user_data=b"\x20\x21")  # the executable only
    exe.launch(stream)
    stream.sync()
    n.update(fn=other, user_data=b"\x30\x31")  # the definition, then the executable from it
    exe.update(g)
    exe.launch(stream)
    stream.sync()
    assert seen == [b"\x10\x11", b"\x20\x21", b"\x30\x31"]
    exe.close()


def test_cuda_core_ctypes_callback_program(GD, gpu, stream, device):
    """A program written against cuda.core: a device fill copied to pinned memory, then a ctypes callback given
    that memory as a raw pointer and a second one given copied bytes."""
    seen: list[Any] = []
    buf = gpu.alloc(N)
    host, view = gpu.pinned(N)
    gd = GD()
    copy = gd.memset(buf, 0x33, N).memcpy(int(host.handle), buf, N, dst_owner=host)
    copy.callback(_reader(seen, 4), user_data=int(host.handle))
    gd.callback(_reader(seen, 3), user_data=b"abc")
    exe = gd.instantiate()
    exe.launch(stream)
    stream.sync()
    assert sorted(seen) == [b"3333", b"abc"] and bytes(view) == b"\x33" * N
    np.testing.assert_array_equal(np.frombuffer(bytes(view), np.uint8), np.full(N, 0x33, np.uint8))
