"""The command line on the CPU: usage and exit codes, the demo's four diagnoses (faked), info, bench, inspect."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from cudagraph.frontends import cli, demo
from cudagraph.frontends import environment as env

SRC = Path(__file__).resolve().parents[1] / "src"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cudagraph", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        cwd=cwd,
        timeout=120,
    )


# ----------------------------------------------------------------------------- usage


def test_help_version_and_usage_errors(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m cudagraph [-h] [--version] COMMAND ...")
    for command in ("demo", "info", "bench", "inspect"):
        assert f"    {command} " in out
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == "cudagraph 0.1.0\n"
    assert cli.main([]) == 2
    assert "error: a command is required (demo, info, bench, inspect)" in capsys.readouterr().err
    assert cli.main(["frobnicate"]) == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err
    assert cli.main(["bench", "nope"]) == 2
    assert "unknown benchmark 'nope' (choose from construction, updates, materializers, control_flow)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-n", "0"], "argument -n: expected a positive integer below 2**31, got 0"),
        (["-n", "-5"], "argument -n: expected a positive integer below 2**31, got -5"),
        (["-n", "ten"], "argument -n: expected a positive integer, got 'ten'"),
        (["--iterations", "1.5"], "argument --iterations: expected a positive integer, got '1.5'"),
        (["-n", str(1 << 31)], f"argument -n: expected a positive integer below 2**31, got {1 << 31}"),
    ],
)
def test_demo_refuses_bad_numbers(capsys, args, message):
    assert cli.main(["demo", *args]) == 2
    assert message in capsys.readouterr().err


def test_runtime_failure_is_one_line_without_traceback(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def make():\n    raise RuntimeError('no graph today')\n")
    r = run_cli("inspect", f"{bad}:make")
    assert r.returncode == 1
    assert r.stderr == "python -m cudagraph inspect: error: make() raised RuntimeError: no graph today.\n"
    assert "Traceback" not in r.stdout + r.stderr


# ------------------------------------------------------------------ probe (faked driver)


def fake_driver(*, version=13000, init="CUDA_SUCCESS", devices=1, load_error=None, cc=(9, 0), attrs=None):
    class Err:
        def __init__(self, name):
            self.name = name

        def __bool__(self):
            return self.name != "CUDA_SUCCESS"

        def __int__(self):
            return 0 if self.name == "CUDA_SUCCESS" else 100

    def get_version():
        if load_error:
            raise load_error
        return Err("CUDA_SUCCESS"), version

    attr_names = [
        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
        "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING",
        "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS",
        "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED",
    ]
    values = {attr_names[0]: cc[0], attr_names[1]: cc[1], **{n: 1 for n in attr_names[2:]}, **(attrs or {})}
    return SimpleNamespace(
        cuDriverGetVersion=get_version,
        cuInit=lambda flags: (Err(init),),
        cuDeviceGetCount=lambda: (Err("CUDA_SUCCESS"), devices),
        cuDeviceGet=lambda i: (Err("CUDA_SUCCESS"), i),
        cuDeviceGetName=lambda n, dev: (Err("CUDA_SUCCESS"), b"NVIDIA H200\0\0\0"),
        cuDeviceGetAttribute=lambda attr, dev: (Err("CUDA_SUCCESS"), values[attr]),
        CUdevice_attribute=SimpleNamespace(**{n: n for n in attr_names}),
    )


def test_probe_no_driver_library():
    p = env.probe(fake_driver(load_error=RuntimeError("libcuda.so.1: cannot open")), "13.3.1")
    assert p.problem == env.NO_DRIVER
    assert p.message == "No NVIDIA driver: the driver library (libcuda) could not be loaded."


def test_probe_stub_driver():
    p = env.probe(fake_driver(init="CUDA_ERROR_STUB_LIBRARY"), "13.3.1")
    assert p.problem == env.NO_DRIVER
    assert p.message == "No NVIDIA driver: only the CUDA toolkit's stub libcuda was found."


@pytest.mark.parametrize(
    ("version", "bindings", "message"),
    [
        (12040, "13.3.1", "The NVIDIA driver is too old: it supports CUDA 12.4 and cuda-bindings 13.3.1 needs CUDA "
         "13.0 or newer (update the driver, or install cuda-bindings 12.x)."),
        (12020, "12.9.0", "The NVIDIA driver is too old: it supports CUDA 12.2 and cudagraph needs CUDA 12.3 or newer "
         "(update the driver)."),
    ],
)  # fmt: skip
def test_probe_driver_too_old_by_version(version, bindings, message):
    p = env.probe(fake_driver(version=version), bindings)
    assert (p.problem, p.driver_version, p.message) == (env.DRIVER_TOO_OLD, version, message)


def test_probe_driver_of_cuda_12_3_is_enough_for_cuda_bindings_12():
    assert env.probe(fake_driver(version=12030), "12.9.0").problem is None


def test_probe_driver_too_old_by_cuinit():
    p = env.probe(fake_driver(init="CUDA_ERROR_INSUFFICIENT_DRIVER"), "13.3.1")
    assert p.problem == env.DRIVER_TOO_OLD
    assert "cuInit answered CUDA_ERROR_INSUFFICIENT_DRIVER" in p.message


def test_probe_no_gpu():
    p = env.probe(fake_driver(init="CUDA_ERROR_NO_DEVICE"), "13.3.1")
    assert p.problem == env.NO_GPU
    assert p.message == "No GPU: the NVIDIA driver (CUDA 13.0) is installed but cuInit answered CUDA_ERROR_NO_DEVICE."
    p = env.probe(fake_driver(devices=0), "13.3.1")
    assert p.problem == env.NO_GPU and p.message == "No GPU: the NVIDIA driver (CUDA 13.0) found no device."


def test_probe_ok():
    p = env.probe(fake_driver(devices=2), "13.3.1")
    assert (p.problem, p.devices, p.driver_version) == (None, 2, 13000)


def test_probe_without_cuda_bindings(monkeypatch):
    monkeypatch.setattr(env, "_load_driver", lambda: (None, "No module named 'cuda'"))
    p = env.probe()
    assert p.problem == env.NO_BINDINGS
    assert p.message == "cuda-bindings is not installed (No module named 'cuda'); pip install cuda-bindings."


# ------------------------------------------------------------------------ demo branches


@pytest.mark.parametrize(
    "found",
    [
        env.Probe(env.NO_DRIVER, "No NVIDIA driver: the driver library (libcuda) could not be loaded."),
        env.Probe(env.NO_GPU, "No GPU: the NVIDIA driver (CUDA 13.0) found no device.", 13000),
        env.Probe(env.DRIVER_TOO_OLD, "The NVIDIA driver is too old: it supports CUDA 12.4.", 12040),
    ],
    ids=["no-driver", "no-gpu", "too-old"],
)
def test_demo_says_which_problem_it_hit(monkeypatch, tmp_path, capsys, found):
    monkeypatch.setattr(demo, "probe", lambda: found)
    dot = tmp_path / "d.dot"
    assert cli.main(["demo", "-n", "100", "--dot", str(dot)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Graph 'demo': 9 nodes, 11 edges\n")
    assert f"wrote {dot}\n" in out
    assert out.endswith(
        f"{found.message} The definition was built and drawn; running it needs an NVIDIA GPU and driver.\n"
    )
    assert dot.read_text().startswith('digraph "demo" {')


def test_demo_dot_to_standard_output(monkeypatch, capsys):
    monkeypatch.setattr(demo, "probe", lambda: env.Probe(env.NO_GPU, "No GPU: none."))
    assert cli.main(["demo", "-n", "64", "--dot", "-"]) == 0
    out = capsys.readouterr().out
    start = out.index('digraph "demo" {\n')
    assert out[start:].count("}\n") == 1 and "wrote" not in out
    assert out.endswith(
        "No GPU: none. The definition was built and drawn; running it needs an NVIDIA GPU and driver.\n"
    )


def test_load_kernels_no_nvrtc_and_no_usable_ptx():
    def ptx():
        raise RuntimeError("CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the PTX was compiled with an unsupported toolchain")

    def nvrtc():
        raise OSError("libnvrtc.so.13: cannot open shared object file")

    with pytest.raises(env.KernelsUnavailable) as ei:
        demo.load_kernels(ptx, nvrtc)
    assert str(ei.value) == (
        "No NVRTC and no usable PTX: the shipped PTX did not load (RuntimeError: CUDA_ERROR_UNSUPPORTED_PTX_VERSION: "
        "the PTX was compiled with an unsupported toolchain) and the source could not be compiled with NVRTC "
        "(OSError: libnvrtc.so.13: cannot open shared object file)."
    )
    assert demo.load_kernels(lambda: {"k": 1}, nvrtc) == {"k": 1}
    assert demo.load_kernels(ptx, lambda: {"k": 2}) == {"k": 2}


def test_demo_without_kernels_says_so(monkeypatch, tmp_path, capsys):
    import cuda.core

    class Device:
        def __init__(self, i):
            pass

        def set_current(self):
            pass

    def no_kernels():
        raise env.KernelsUnavailable("No NVRTC and no usable PTX: both failed.")

    monkeypatch.setattr(demo, "probe", lambda: env.Probe(None, "1 GPU(s).", 13000, 1))
    monkeypatch.setattr(cuda.core, "Device", Device)
    monkeypatch.setattr(demo, "load_kernels", no_kernels)
    assert cli.main(["demo", "-n", "10", "--dot", str(tmp_path / "d.dot")]) == 0
    assert capsys.readouterr().out.endswith(
        "No NVRTC and no usable PTX: both failed. The definition was built and drawn; running it needs an NVIDIA "
        "GPU and driver.\n"
    )


# ------------------------------------------------------------------------------- info


def test_info_with_a_gpu(capsys):
    assert cli.cmd_info(SimpleNamespace(), fake_driver(version=12080, cc=(9, 0)), "12.9.0") == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[0].startswith("cudagraph 0.1.0 (Python ")
    assert lines[1] == "cuda-bindings: 12.9.0"
    assert lines[3].startswith("compiled module: ")
    assert "driver: CUDA 12.8 (12080)" in lines
    assert "GPU 0: NVIDIA H200 (compute capability 9.0)" in lines
    table = {ln[2:40].strip(): ln[41:].strip() for ln in lines if ln.startswith("  ")}
    assert table["conditional if/while nodes"] == "yes  (driver >= 12.3)"
    assert table["if/else and switch nodes"] == "yes  (driver >= 12.8)"
    assert table["programmatic dependent launch edges"] == "yes  (driver >= 12.3, sm_90+)"
    assert table["batch memory operation nodes"] == "yes  (driver >= 11.7)"
    assert table["device-side graph launch"] == "yes  (driver >= 12.0)"


def test_info_features_follow_driver_and_device(capsys):
    drv = fake_driver(version=12040, cc=(8, 0), attrs={"CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED": 0})
    assert cli.cmd_info(SimpleNamespace(), drv, "12.4.0") == 0
    lines = capsys.readouterr().out.split("\n")
    table = {ln[2:40].strip(): ln[41:].strip() for ln in lines if ln.startswith("  ")}
    assert table["if/else and switch nodes"] == "no   (needs a CUDA 12.8 driver)"
    assert table["programmatic dependent launch edges"] == "no   (needs compute capability 9.0)"
    assert (
        table["graph memory nodes (alloc/free)"] == "no   (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0 on this GPU)"
    )
    assert table["conditional if/while nodes"] == "yes  (driver >= 12.3)"


def test_info_without_gpu_or_driver(capsys):
    assert cli.cmd_info(SimpleNamespace(), fake_driver(init="CUDA_ERROR_NO_DEVICE"), "13.3.1") == 0
    out = capsys.readouterr().out
    assert "driver: CUDA 13.0 (13000)\nNo GPU: the NVIDIA driver (CUDA 13.0) is installed" in out
    assert "features of this driver (no GPU to ask about its own):" in out
    assert "GPU 0" not in out
    assert cli.cmd_info(SimpleNamespace(), fake_driver(load_error=OSError("nope")), "13.3.1") == 0
    out = capsys.readouterr().out
    assert out.endswith("No NVIDIA driver: the driver library (libcuda) could not be loaded.\n")


def test_info_names_each_optional_compiled_module_and_its_state(capsys, monkeypatch):
    import importlib

    real = importlib.import_module

    def no_ranges(name, *a):
        if name == "cudagraph.definition._ranges":
            raise ImportError("not built")
        return real(name, *a)

    monkeypatch.setattr(importlib, "import_module", no_ranges)
    assert cli.cmd_info(SimpleNamespace(), fake_driver(load_error=OSError("nope")), "13.3.1") == 0
    lines = [ln for ln in capsys.readouterr().out.split("\n") if ln.startswith("compiled cudagraph.")]
    names = [ln.split(" ")[1] for ln in lines]
    assert names == [
        "cudagraph.definition._define",
        "cudagraph.driver._reads",
        "cudagraph.definition._ranges",
        "cudagraph.definition._reach",
    ]
    assert lines[2].endswith("): not built (it needs a C/C++ compiler at install; see setup.py's notes)")
    monkeypatch.setenv("CUDAGRAPH_NO_C_ENTRY", "1")
    assert cli.cmd_info(SimpleNamespace(), fake_driver(load_error=OSError("nope")), "13.3.1") == 0
    lines = [ln for ln in capsys.readouterr().out.split("\n") if ln.startswith("compiled cudagraph.")]
    assert len(lines) == 4 and all(ln.endswith("): off (CUDAGRAPH_NO_C_ENTRY is set)") for ln in lines)


def test_info_on_this_machine_exits_zero():
    r = run_cli("info")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("cudagraph 0.1.0")
    assert "compiled module: " in r.stdout


# ------------------------------------------------------------------------------ bench


def test_bench_dir_is_found_in_the_checkout():
    assert cli.find_bench_dir() == SRC.parent / "bench"


def test_bench_refuses_outside_a_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cli.CommandError, match="the benchmarks live in the bench/ folder of a cudagraph checkout"):
        cli.find_bench_dir(tmp_path)


def test_bench_runs_scripts_with_progress(tmp_path, monkeypatch, capfd):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "construction.py").write_text("import sys\nprint('| table |', sys.argv[1:])\n")
    (bench / "updates.py").write_text("import cudagraph\nprint('| updates |', cudagraph.__version__)\n")
    monkeypatch.setattr(cli, "find_bench_dir", lambda: bench)
    assert cli.main(["bench", "construction", "updates", "--quick"]) == 0
    out, err = capfd.readouterr()
    assert out == "| table | ['--quick']\n| updates | 0.1.0\n"
    lines = err.strip().split("\n")
    assert lines[0] == "[1/2] construction: " + str(bench / "construction.py") + " --quick"
    assert re.match(r"^\[1/2\] construction: done in \d+\.\d s$", lines[1])
    assert re.match(r"^\[2/2\] updates: done in \d+\.\d s$", lines[3])
    (bench / "updates.py").write_text("raise SystemExit(3)\n")
    assert cli.main(["bench", "updates"]) == 1
    err = capfd.readouterr().err
    assert "[1/1] updates: failed (exit code 3)" in err
    assert err.endswith("python -m cudagraph bench: error: benchmark(s) updates failed; their output is above.\n")


# ---------------------------------------------------------------------------- inspect

MAKER = textwrap.dedent(
    """
    import cudagraph as cg

    def make():
        g = cg.Graph("made")
        a = g.empty(name="a")
        g.empty(after=a, name="b")
        return g

    def number():
        return 42

    NOT_A_FUNCTION = 1
    """
)


def test_inspect_prints_the_summary_and_writes_pictures(tmp_path, capsys):
    f = tmp_path / "maker.py"
    f.write_text(MAKER)
    stem = tmp_path / "pic"
    assert cli.main(["inspect", f"{f}:make", "--out", str(stem), "--formats", "", "--mermaid"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Graph 'made': 2 nodes, 1 edges\n")
    assert out.endswith(f"wrote {stem}.dot, {stem}.mmd\n")
    assert Path(f"{stem}.dot").read_text().startswith('digraph "made" {')
    assert Path(f"{stem}.mmd").read_text().startswith("flowchart TD")


def test_inspect_svg_when_graphviz_is_installed(tmp_path, capsys):
    pytest.importorskip("graphviz", reason="the graphviz Python package is not installed")
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    f = tmp_path / "maker.py"
    f.write_text(MAKER)
    assert cli.main(["inspect", f"{f}:make", "--out", str(tmp_path / "p"), "--formats", "svg"]) == 0
    assert "<svg" in (tmp_path / "p.svg").read_text()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("{f}", "expected FILE.py:function, got '{f}'"),
        ("{f}:missing", "'{f}' has no function 'missing'"),
        ("{f}:NOT_A_FUNCTION", "'{f}' has no function 'NOT_A_FUNCTION'"),
        ("{d}/nope.py:make", "there is no file '{d}/nope.py'"),
        ("{f}:number", "number() returned int, which is neither a Graph, an Executable nor a driver graph"),
    ],
)
def test_inspect_refusals(tmp_path, capsys, target, message):
    f = tmp_path / "maker.py"
    f.write_text(MAKER)
    assert cli.main(["inspect", target.format(f=f, d=tmp_path), "--formats", ""]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"python -m cudagraph inspect: error: {message.format(f=f, d=tmp_path)}")
    assert err.count("\n") == 1
