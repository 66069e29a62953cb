"""Hostile cases that need real files, devices, processes or signals (issue 28): outputs into character
devices, FIFOs and full disks; SIGTERM / SIGHUP / SIGKILL to the planner alone; memory-bomb inputs
under a 1 GB address-space limit; corrupted numba caches; control characters and spreadsheet
formulas in outputs. CI runs as root, so the device cases run for real there.

The in-process plans of the output cases are a short random search in this process (``QUICK``): the
default exhaustive search over a pool of one worker per CPU costs about 1 CPU-s per plan, and these
cases are about where the output goes, not the plan (the signal cases use the real search)."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tileplan.cli import run
from tileplan.errors import TileplanError

ROOT = os.geteuid() == 0
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), "TILEPLAN_KERNEL": "numpy"}
CLI = [sys.executable, "-m", "tileplan.entry"]
QUICK = ["-j", "1", "--strategy", "random", "--budget", "10"]


def _one_error(capsys: pytest.CaptureFixture[str], code: int, expect: str) -> None:
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and expect in err, err


# ----------------------------------------------------------------------------- devices, FIFOs, full disks
@pytest.mark.skipif(not ROOT, reason="making device nodes needs root (CI runs as root)")
def test_a_character_device_is_written_to_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    os.mknod("null", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
    assert run(["plan", "lenet5", *QUICK, "--json", "null", "--csv", "/dev/null"]) == 0
    capsys.readouterr()
    for dev in (tmp_path / "null", Path("/dev/null")):
        st = os.stat(dev)
        assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3, dev
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temp file left next to it


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_device_is_one_disk_full_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code = run(["plan", "lenet5", *QUICK, "--json", "/dev/full"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: cannot write /dev/full: no space left on the device (disk full)"), err
    assert len(err.splitlines()) == 1
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """ENOSPC while the new file is flushed: one clear error, the old file byte-identical, no temp."""
    import tileplan.files

    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.csv").write_text("old plan\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tileplan.files.os, "fsync", full)
    code = run(["plan", "lenet5", *QUICK, "--csv", "plan.csv"])
    err = capsys.readouterr().err
    assert code == 2 and "plan.csv: no space left on the device (disk full)" in err and "unchanged" in err, err
    assert (tmp_path / "plan.csv").read_text() == "old plan\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.csv"]


def test_a_fifo_is_streamed_into(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("pipe")
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(Path("pipe").read_bytes()), daemon=True)
    reader.start()
    assert run(["plan", "lenet5", *QUICK, "--json", "pipe"]) == 0
    reader.join(10)
    assert got and got[0].startswith(b"{") and b'"network": "lenet5"' in got[0]
    assert stat.S_ISFIFO(os.stat("pipe").st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_dev_stdout_streams_to_the_caller(tmp_path: Path) -> None:
    done = subprocess.run([*CLI, "plan", "lenet5", *QUICK, "--json", "/dev/stdout"], cwd=tmp_path, env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '"network": "lenet5"' in done.stdout and Path("/dev/stdout").is_symlink()
    assert list(tmp_path.iterdir()) == []


def test_the_same_plan_twice_to_dev_null_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Two outputs on one device are not 'the same file' (nothing is replaced)."""
    monkeypatch.chdir(tmp_path)
    assert run(["plan", "lenet5", *QUICK, "--json", "/dev/null", "--csv", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


# ----------------------------------------------------------------------------- signals and workers
def _live(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if state[state.rindex(")") + 2] != "Z":
            alive.add(pid)
    return alive


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it (by parent id)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(text[text.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        out.add(pid)
        todo.extend(children.get(pid, []))
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize(("sig", "code"), [
    (signal.SIGTERM, 143),
    # (each costs a fresh planner and its workers, ~4 CPU-s: SIGTERM is the representative in the default run)
    pytest.param(signal.SIGHUP, 129, marks=pytest.mark.slow),
    pytest.param(signal.SIGKILL, -9, marks=pytest.mark.slow),
])
def test_a_signal_to_the_planner_alone_leaves_nothing(tmp_path: Path, sig: int, code: int) -> None:
    """Only the parent gets the signal (not its process group): its workers still end within 2 s,
    nothing is written, and no /dev/shm value file of the run is left (after SIGKILL, the next run
    removes it)."""
    proc = subprocess.Popen([*CLI, "plan", "vgg16", "--json", "out.json", "--jobs", "2"], cwd=tmp_path, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_live(_descendants(proc.pid))) < 3:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        time.sleep(0.5)
        run_pids = _live(_descendants(proc.pid))
        assert len(run_pids) >= 3 and proc.poll() is None
        os.kill(proc.pid, sig)
        _, stderr = proc.communicate(timeout=20)
        time.sleep(2)
        assert _live(run_pids) == set()  # no worker outlives its parent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == code, stderr
    if sig != signal.SIGKILL:
        assert stderr.splitlines()[-1] == "interrupted" and "Traceback" not in stderr
    assert list(tmp_path.iterdir()) == []
    shm = Path("/dev/shm")
    if shm.is_dir():
        if sig == signal.SIGKILL:
            from tileplan.search.shared import shared_values

            with shared_values(1):  # the next run removes what a killed one left
                pass
        assert not list(shm.glob(f"tileplan-best-{proc.pid}-*"))


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_a_sweep_stopped_by_sigterm_leaves_no_shared_memory(tmp_path: Path) -> None:
    proc = subprocess.Popen([*CLI, "sweep", "vgg16,resnet50", "-o", "s.csv", "--jobs", "2", "--no-plot"], cwd=tmp_path,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_live(_descendants(proc.pid))) < 3:
            time.sleep(0.1)
        time.sleep(1.0)
        run_pids = _live(_descendants(proc.pid))
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
        time.sleep(2)
        assert _live(run_pids) == set()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 143 and stderr.splitlines()[-1] == "interrupted", stderr
    assert not [p for pid in run_pids for p in Path("/dev/shm").glob(f"tileplan-best-{pid}-*")]
    assert (tmp_path / "s.csv").read_text().startswith("point,model,strategy,objective,")  # resumable


def test_orphaned_value_files_are_removed(tmp_path: Path) -> None:
    from tileplan.search import shared

    child = subprocess.Popen(["true"])
    child.wait()
    dead = child.pid  # a process id that has just ended
    live = os.getpid()
    for pid in (dead, live):
        (tmp_path / f"tileplan-best-{pid}-abc.f64").write_bytes(b"\0" * 8)
    (tmp_path / "tileplan-best-old.f64").write_bytes(b"")  # not ours to judge: kept
    shared._remove_orphans(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"tileplan-best-{live}-abc.f64", "tileplan-best-old.f64"])


def test_a_ray_address_that_does_not_answer_fails_fast() -> None:
    from tileplan.sweep import check_ray_address

    start = time.monotonic()
    with pytest.raises(TileplanError, match="no Ray cluster answers"):
        check_ray_address("127.0.0.1:1")
    with pytest.raises(TileplanError, match="HOST:PORT"):
        check_ray_address("localhost")
    assert time.monotonic() - start < 5


# ----------------------------------------------------------------------------- memory bombs under 1 GB
BOMBS = {
    "onnx-pad-1e6": (["plan", "m.onnx"], "pad", "padding of 1,000,000"),
    "onnx-resize-1e9": (["plan", "m.onnx"], "resize", "larger than the 65,536"),
    "arch-dev-zero": (["plan", "lenet5", "--arch", "/dev/zero"], None, "larger than 64 MiB"),
    "mapping-dev-zero": (["eval", "lenet5", "--layer", "conv1", "--mapping", "/dev/zero"], None, "larger than 64 MiB"),
    "measured-dev-zero": (["correlate", "/dev/zero", "/dev/zero"], None, "larger than 64 MiB"),
}


#: Memory bombs run in a fresh, memory-limited process in the default run (one ONNX model, one /dev/zero
#: file: ~1 CPU-s each); the rest are ``slow`` there (each bomb's error line is checked in-process below).
RSS_DEFAULT = ("onnx-pad-1e6", "arch-dev-zero")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="address-space limit and ru_maxrss are Linux's")
@pytest.mark.parametrize("name", [n if n in RSS_DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in BOMBS])
def test_memory_bombs_stay_under_1_gb(tmp_path: Path, name: str) -> None:
    from test_hostile import pad_model, resize_model

    argv, model, expect = BOMBS[name]
    if model == "pad":
        (tmp_path / "m.onnx").write_bytes(pad_model(10**6))
    elif model == "resize":
        (tmp_path / "m.onnx").write_bytes(resize_model(1e9))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2**30 + 2**29, 2**30 + 2**29))  # numpy/numba map ~0.5 GB

    with open(tmp_path.parent / f"{name}.err", "w+") as err:
        proc = subprocess.Popen([*CLI, *argv], cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=limit)
        _, status, usage = os.wait4(proc.pid, 0)  # this process's own peak memory, not the largest child's
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    assert proc.returncode == 2 and stderr.strip().splitlines()[-1].startswith("error: "), stderr
    assert expect in stderr and "Traceback" not in stderr
    PEAK_RSS_KIB[name] = usage.ru_maxrss
    print(f"peak RSS of {name}: {usage.ru_maxrss / 1024:.0f} MiB")
    assert usage.ru_maxrss < 2**20, usage.ru_maxrss  # KiB: under 1 GiB
    assert sorted(p.name for p in tmp_path.iterdir()) == (["m.onnx"] if model else [])


#: Peak resident memory (KiB) of each memory-bomb case (printed by the test above, for the record).
PEAK_RSS_KIB: dict[str, int] = {}


@pytest.mark.parametrize("name", list(BOMBS))
def test_memory_bombs_are_one_clear_error_in_process(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Every bomb, in this process: exit 2, one error line naming the limit, nothing written (the peak
    memory of a fresh process is measured above)."""
    from test_hostile import pad_model, resize_model

    argv, model, expect = BOMBS[name]
    monkeypatch.chdir(tmp_path)
    if model == "pad":
        (tmp_path / "m.onnx").write_bytes(pad_model(10**6))
    elif model == "resize":
        (tmp_path / "m.onnx").write_bytes(resize_model(1e9))
    _one_error(capsys, run(argv), expect)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["m.onnx"] if model else [])


# ----------------------------------------------------------------------------- caches that heal
CACHED = '''
import numba

@numba.njit(cache=True)
def add_one(x):
    return x + 1
'''


@pytest.mark.parametrize("damage", ["truncate-nbc", "empty-nbi", "garbage-nbi", "garbage-nbc"])
def test_a_corrupt_numba_cache_is_removed_and_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     damage: str) -> None:
    """The healing rule on a small cached function: after damaging its cache file, the check finds
    it, removes the function's cache (one note), and the next compile writes a good one again."""
    import importlib

    from tileplan.cost import jit

    (tmp_path / "healme.py").write_text(CACHED)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("healme")
    assert mod.add_one(1) == 2  # compiled and cached
    cache = tmp_path / "__pycache__"
    nbi, = cache.glob("healme.add_one-*.nbi")
    nbc, = cache.glob("healme.add_one-*.nbc")
    assert jit._cache_holds(mod.add_one.py_func)
    if damage == "truncate-nbc":
        nbc.write_bytes(nbc.read_bytes()[: nbc.stat().st_size // 2])
    elif damage == "garbage-nbc":
        nbc.write_bytes(b"\x80\x05garbage" * 100)
    elif damage == "empty-nbi":
        nbi.write_bytes(b"")
    else:
        nbi.write_bytes(os.urandom(300))
    monkeypatch.setattr(jit, "HEALED", [])
    assert not jit._cache_holds(mod.add_one.py_func)
    assert not list(cache.glob("healme.add_one-*.nb*"))  # the whole entry went
    assert len(jit.HEALED) == 1 and jit.HEALED[0][0] == str(nbi)
    import numba

    again = numba.njit(cache=True)(mod.add_one.py_func)
    assert again(41) == 42 and jit._cache_holds(mod.add_one.py_func)  # rebuilt, and good
    del sys.modules["healme"]


INLINED_MAIN = '''
import numba
from inlhelp import twice

INLINED_FROM = ("inlhelp",)

@numba.njit(cache=True)
def add_twice(x):
    return twice(x) + 1
'''
INLINED_HELP = '''
import numba

@numba.njit
def twice(x):
    return 2 * x
'''


def test_a_cache_older_than_a_module_compiled_into_it_is_dropped(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """numba keys a cached function by its own file; the cost kernel's loop also compiles in ``cost.flat``
    and ``cost.finish`` (``kernel.INLINED_FROM``). When one of those is newer than the cache, the cache
    is removed (and not reported as corrupt) instead of loading the old machine code."""
    import importlib

    from tileplan.cost import jit

    (tmp_path / "inlmain.py").write_text(INLINED_MAIN)
    (tmp_path / "inlhelp.py").write_text(INLINED_HELP)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("inlmain")
    assert mod.add_twice(3) == 7  # compiled and cached
    cache = tmp_path / "__pycache__"
    nbi, = cache.glob("inlmain.add_twice-*.nbi")
    monkeypatch.setattr(jit, "HEALED", [])
    assert jit._cache_holds(mod.add_twice.py_func)
    later = nbi.stat().st_mtime + 10
    os.utime(tmp_path / "inlhelp.py", (later, later))  # the helper changed after the compile
    assert not jit._cache_holds(mod.add_twice.py_func)
    assert not list(cache.glob("inlmain.add_twice-*.nb*")) and jit.HEALED == []
    del sys.modules["inlmain"], sys.modules["inlhelp"]


NO_SPAWN = """
import sys
from tileplan.cost import jit

def no_spawn(*args, **kwargs):
    raise OSError("the test starts no background compile")

jit.subprocess.Popen = no_spawn
from tileplan.cli import run
sys.exit(run(["plan", "lenet5"]))
"""


@pytest.mark.parametrize("damage", ["truncate-nbc", pytest.param("empty-nbi", marks=pytest.mark.slow)])
def test_the_planner_survives_its_own_corrupt_kernel_cache(tmp_path: Path, damage: str) -> None:
    """End to end on the real cost kernel: with its cache file damaged, ``plan`` still succeeds (numpy
    twin, same numbers) with one note, where it failed with 'internal error UnpicklingError' before.
    The damage is done to a copy of the package with its numba cache (modification times kept, so
    the copy's cache is valid): tests running beside this one never see a damaged cache."""
    import shutil

    from tileplan.cost import jit, kernel

    if not jit._cache_holds(kernel.model_loop):
        pytest.skip("numba's cache does not hold the cost kernel (run python -m tileplan.warmup)")
    real = jit.cache_folder(kernel.model_loop)
    assert real is not None
    package = Path(kernel.__file__).resolve().parent.parent
    copy = tmp_path / "src" / "tileplan"
    shutil.copytree(package, copy, copy_function=shutil.copy2)
    folder = copy / real.relative_to(package)
    for built in copy.rglob("__pycache__/*_aot-*"):  # numba's cache, not the extensions built at install
        built.unlink()
    # (numba names a cache entry by the function's first line: an older kernel.py's entries may lie beside it)
    damaged = sorted(folder.glob(f"kernel.model_loop-{kernel.model_loop.__code__.co_firstlineno}.*.nb*"))
    assert damaged
    for path in damaged:
        data = path.read_bytes()
        if damage == "truncate-nbc" and path.suffix == ".nbc":
            path.write_bytes(data[: len(data) // 3])
        elif damage == "empty-nbi" and path.suffix == ".nbi":
            path.write_bytes(b"")
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, "-c", NO_SPAWN], cwd=work, capture_output=True, text=True,
                          env={**ENV, "PYTHONPATH": str(copy.parent), "TILEPLAN_KERNEL": "auto"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "latency 32,790 cycles" in done.stdout  # lenet5 on nmp, as the compiled kernel gives
    assert "note: removed a corrupt numba cache file (kernel.model_loop" in done.stderr, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert not any(p.exists() for p in damaged)  # the corrupt entry went (and the real cache was never touched)


# Both damages take the same path (the sha256 check, before the library is loaded; the same note): the
# flipped byte, which a loader alone would not notice, is the representative in the default run.
@pytest.mark.parametrize("damage", [pytest.param("truncate", marks=pytest.mark.slow), "flip-a-byte"])
def test_the_planner_survives_its_own_corrupt_kernel_extension(tmp_path: Path, damage: str) -> None:
    """The kernel's extension built at install (``cost.aot``) damaged in a copy of the package: ``plan``
    removes it with one note, never loads it (a flipped byte is caught by its sha256, before it could
    run), and plans on numba's cache with the same numbers."""
    import shutil

    from tileplan.cost import aot, compiled, kernel

    so, side = aot.paths(compiled.EXTENSION, aot.key(compiled.EXTENSION, aot.cpu_fingerprint()))
    if not (so.exists() and side.exists()):
        pytest.skip("the kernel's extension is not built (python -m tileplan.warmup builds it)")
    package = Path(kernel.__file__).resolve().parent.parent
    copy = tmp_path / "src" / "tileplan"
    shutil.copytree(package, copy, copy_function=shutil.copy2)
    damaged = copy / so.relative_to(package)
    data = damaged.read_bytes()
    damaged.write_bytes(data[: len(data) // 2] if damage == "truncate"
                        else data[:9000] + bytes([data[9000] ^ 0xFF]) + data[9001:])
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, "-c", NO_SPAWN], cwd=work, capture_output=True, text=True,
                          env={**ENV, "PYTHONPATH": str(copy.parent), "TILEPLAN_KERNEL": "auto"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "latency 32,790 cycles" in done.stdout
    assert (f"note: removed a corrupt compiled-loop extension (cost.aot) ({so.name}: ValueError: the library is "
            f"not the one built (sha256 differs))") in done.stderr, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert not damaged.exists() and not (copy / side.relative_to(package)).exists()
    assert so.exists() and side.exists()  # the real one was never touched


def test_compiled_main_heals_and_fails_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from tileplan import warmup

    def broken() -> None:
        raise RuntimeError("the compiler exploded")

    monkeypatch.setattr(warmup, "warm_up", broken)
    monkeypatch.setattr(warmup.jit, "heal", lambda loops: [("/x/kernel.model_loop-1.py311.nbi", "EOFError: ")])
    assert warmup.main([]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("note: removed a corrupt numba cache file (kernel.model_loop-1.py311.nbi")
    assert err[1].startswith("error: compiling the cost kernel failed (RuntimeError: the compiler exploded)")
    assert len(err) == 2


# ----------------------------------------------------------------------------- terminal and spreadsheet safety
def test_names_print_with_control_characters_escaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from test_hostile import TINY

    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.yaml").write_text(TINY.replace("name: tiny", 'name: "evil\\e]0;pwned\\a\\e[31m"')
                                        .replace("name: buf", 'name: "b\\e[2Juf"'))
    assert run(["plan", "lenet5", *QUICK, "--arch", "evil.yaml"]) == 0
    assert run(["arch", "show", "evil.yaml"]) == 0
    out = capsys.readouterr().out
    assert "evil\\x1b]0;pwned\\x07\\x1b[31m" in out and "b\\x1b[2Juf" in out
    assert "\x1b" not in out and "\x07" not in out



def test_names_print_without_markup_or_emoji(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A name or description that looks like rich markup or an emoji code prints as written."""
    from test_hostile import TINY

    monkeypatch.chdir(tmp_path)
    odd = "x [b]bold[/b] :fire: [red]"
    (tmp_path / "odd.yaml").write_text(TINY.replace("name: tiny", f'name: "{odd}"\ndescription: "{odd}"'))
    assert run(["arch", "show", "odd.yaml"]) == 0
    assert run(["plan", "lenet5", *QUICK, "--arch", "odd.yaml"]) == 0
    out = capsys.readouterr().out
    assert f"{odd}: {odd}" in out  # arch show's title
    assert f"lenet5 on {odd}" in out  # the plan table's title
    assert "\N{FIRE}" not in out

def test_csv_cells_never_run_as_formulas(tmp_path: Path) -> None:
    """Text cells starting with = + - @ get a leading quote; numbers (negative ones too) stay numbers."""
    import csv
    import io

    from tileplan.compare import Comparison
    from tileplan.experiments.common import table_csv
    from tileplan.files import csv_cell

    text = table_csv([{"layer": "=HYPERLINK(\"http://x\")", "delta": -3.5, "note": "-2", "who": "@SUM(A1)"},
                      {"layer": "+cmd|' /C calc'!A0", "delta": 1.0, "note": "-x", "who": "ok"}])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["layer"] for r in rows] == ["'=HYPERLINK(\"http://x\")", "'+cmd|' /C calc'!A0"]
    assert [r["delta"] for r in rows] == ["-3.5", "1"] and [r["note"] for r in rows] == ["-2", "'-x"]
    assert rows[0]["who"] == "'@SUM(A1)"
    assert csv_cell(-7) == -7 and csv_cell("-1e-05") == "-1e-05" and csv_cell("\tx") == "'\tx"
    assert Comparison is not None


def test_layer_names_in_a_plan_csv_are_defused() -> None:
    import csv
    import io
    from dataclasses import replace

    from tileplan import api
    from tileplan.report.tables import plan_csv
    from tileplan.sweep import SweepPoint
    from tileplan.workload.network import Network

    conv = replace(api.load_network("lenet5")["conv1"], name="=cmd|' /C calc'!A0")
    plan = api.plan(Network("n", (conv,), (1, 1, 32, 32)), api.load_arch("nmp"), jobs=1)
    row = next(csv.DictReader(io.StringIO(plan_csv(plan))))
    assert row["layer"] == "'=cmd|' /C calc'!A0" and float(row["latency_cycles"]) == plan.latency_cycles
    assert SweepPoint(0, "-evil.onnx", "exhaustive", "latency", (("x", "-1"),)).key() == (
        "0", "'-evil.onnx", "exhaustive", "latency", "-1")
