"""The benchmark suite of issue 7 in one command: every part, then docs/benchmarks.{json,md,png}.

Run (``tox -e bench`` runs exactly this)::

    python benchmarks/run.py                  # everything (~30 min on 2 cores, ~10 of them detection)
    python benchmarks/run.py --quick          # a smoke run: fewer payloads and iterations
    python benchmarks/run.py --parts startup codec --out-dir /tmp/bench
    python benchmarks/run.py --parts detection --keep-other-parts   # re-measure one part into docs/

Parts, each a child process with a hard timeout (a part that fails or times
out is reported as such; the others still run):

* ``collectives`` -- ``collectives.py`` for every installed backend at world
  sizes 2 and 4: torch_cpu (gloo, spawned ranks), mpi4py (under ``mpiexec``),
  torch_horovod (under ``horovodrun --gloo``, only where a Horovod build is
  importable: ``$MMEVAL_BENCH_HOROVOD_PYTHON`` or ``.tox/horovod-torch``);
* ``mmeval021`` -- the same script with MMEval 0.2.1's backends, in MMEval
  0.2.1's own environment (``mmeval021_env.py`` builds it once);
* ``compute`` -- ``compute.py``: Accuracy.compute end to end, ours and MMEval 0.2.1;
* ``metrics`` -- ``metrics.py``: issue 15's figures (Accuracy's and MeanIoU's bytes sent by the state
  path, a per-sample metric's peak memory on rank 0) on torch_cpu and mpi4py at world sizes 2 and 4;
* ``catalogue`` -- ``catalogue.py``: every metric of the shared test table (MMEval 0.2.1's catalogue):
  bytes sent per rank and ``compute()`` time at n and 4 n samples, on torch_cpu (and mpi4py) at world size 2;
* ``exactsum`` -- ``exact_sums.py``: issue 32's figures (the float-state metrics with their sums exact and
  plain, side by side: bytes sent by ``compute()`` and its time) on torch_cpu at world size 2;
* ``detection`` -- ``detection.py``: issue 21's figures (COCO mAP on synthetic COCO-like data): pycocotools,
  faster-coco-eval and ours in one process; ours on torch_cpu at world sizes 2 and 3 and on mpi4py at 2,
  torchmetrics' ``MeanAveragePrecision`` at 2, MMEval 0.2.1's ``COCODetection`` at 2 (its own venv);
* ``collection`` -- ``collection.py``: five metrics in one ``MetricCollection.compute()`` against their five
  own ``compute()`` calls (collectives, bytes sent, time) on torch_cpu at world size 2;
* ``startup`` -- ``startup.py``; ``codec`` -- ``codec.py``.

Every child runs with ``MALLOC_MMAP_THRESHOLD_=65536``, gloo on the loopback
interface and one intra-op thread per rank. ``report.py`` turns the JSON into
the Markdown and the plot (and can be re-run alone).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import mmeval021_env  # noqa: E402
import report  # noqa: E402

PARTS = (
    "collectives",
    "mmeval021",
    "compute",
    "metrics",
    "catalogue",
    "exactsum",
    "detection",
    "collection",
    "startup",
    "codec",
)
#: Distributions of the test suite's fixture plugins: never part of a measurement.
FIXTURE_DISTS = "mmeval-fixture-plugin,mmeval-fixture-rival"


class Job:
    """One child process of the suite."""

    def __init__(
        self, part: str, title: str, cmd: List[str], timeout: float, env: Optional[Dict[str, str]] = None
    ) -> None:
        self.part, self.title, self.cmd, self.timeout = part, title, cmd, timeout
        self.env = env or {}
        self.out: Optional[Path] = None


def _fixtures_installed() -> bool:
    """Whether the test suite's fixture plugins are installed here (a dev venv, not the bench env)."""
    from importlib import metadata

    for name in FIXTURE_DISTS.split(","):
        try:
            metadata.version(name)
            return True
        except metadata.PackageNotFoundError:
            continue
    return False


def _child_env(extra: Dict[str, str]) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(common.MALLOC_PIN)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env.setdefault("OMP_NUM_THREADS", "1")
    if _fixtures_installed():  # a dev venv: keep the test suite's fixture backends and hooks out of the timings
        env.setdefault("MMEVAL_DISABLE_PLUGINS", FIXTURE_DISTS)
    env.update(extra)
    return env


def _importable(python: str, code: str, timeout: float = 180) -> Tuple[bool, str]:
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    return proc.returncode == 0, last


def horovod_python() -> Tuple[Optional[str], str]:
    """A Python whose environment has Horovod built for torch (and horovodrun), else ``None`` and why."""
    candidates = [
        os.environ.get("MMEVAL_BENCH_HOROVOD_PYTHON", ""),
        str(REPO / ".tox" / "horovod-torch" / "bin" / "python"),
    ]
    for python in [c for c in candidates if c]:
        if not Path(python).exists():
            continue
        ok, why = _importable(python, "import horovod.torch, torch")
        runner = Path(python).parent / "horovodrun"
        if ok and runner.exists():
            return python, ""
        return None, f"{python}: {why or 'no horovodrun next to it'}"
    return None, "no Horovod environment (tox -e horovod-torch builds one; or set MMEVAL_BENCH_HOROVOD_PYTHON)"


def plan(args: argparse.Namespace, notes: List[str]) -> List[Job]:
    """The jobs to run, in order."""
    py = sys.executable
    quick = args.quick
    scale = ["--iters-scale", "0.4"] if quick else []
    payloads = ["--payloads", "dict1k", "arr16m", "tuples100k"] if quick else []
    sizes = (2,) if quick else (2, 4)
    jobs: List[Job] = []
    parts = set(args.parts)
    if "collectives" in parts:
        for ws in sizes:
            # ws=4 runs 4 ranks on 2 cores, each faulting in up to 1 GiB per 256 MB call: fewer iterations
            extra = scale if ws == 2 else ["--iters-scale", "0.4" if quick else "0.6"]
            jobs.append(
                Job(
                    "collectives",
                    f"torch_cpu ws={ws}",
                    [
                        py,
                        str(HERE / "collectives.py"),
                        "--backend",
                        "torch_cpu",
                        "--world-size",
                        str(ws),
                        "--timeout",
                        "840",
                        *payloads,
                        *extra,
                    ],
                    900,
                )
            )
        ok, why = _importable(py, "import mpi4py.MPI")
        if ok and shutil.which("mpiexec", path=os.path.dirname(py) + os.pathsep + os.environ.get("PATH", "")):
            for ws in sizes:
                # ws=4 runs 4 busy-polling MPICH ranks on 2 cores: blocking MPI calls (the raw and mpi4py methods)
                # take seconds where they take milliseconds at ws=2. Fewer iterations, no 256 MB, reported as erratic.
                extra = scale if ws == 2 else ["--iters-scale", "0.4"]
                sel = (
                    payloads
                    if ws == 2 or quick
                    else ["--payloads", "dict1k", "arr1m", "arr16m", "arr64m", "tuples100k"]
                )
                jobs.append(
                    Job(
                        "collectives",
                        f"mpi4py ws={ws}",
                        [
                            py,
                            str(HERE / "collectives.py"),
                            "--backend",
                            "mpi4py",
                            "--world-size",
                            str(ws),
                            "--timeout",
                            "600",
                            *sel,
                            *extra,
                        ],
                        660,
                    )
                )
        else:
            notes.append(f"mpi4py not benchmarked: {why or 'mpiexec not found'}")
        hpy, why = horovod_python() if not args.no_horovod else (None, "--no-horovod given")
        if hpy is not None:
            runner = str(Path(hpy).parent / "horovodrun")
            pythonpath = os.pathsep.join(
                [str(REPO / "core" / "src"), str(REPO / "plugins" / "horovod_backend" / "src")]
            )
            # Horovod's own allgather_object takes ~12 s for 64 MB here: no 256 MB, few iterations
            hpayloads = payloads or ["--payloads", "dict1k", "arr16m", "arr64m", "tuples100k"]
            jobs.append(
                Job(
                    "collectives",
                    "torch_horovod ws=2",
                    [
                        runner,
                        "--gloo",
                        "-np",
                        "2",
                        "-H",
                        "localhost:2",
                        hpy,
                        str(HERE / "collectives.py"),
                        "--backend",
                        "torch_horovod",
                        "--world-size",
                        "2",
                        "--timeout",
                        "540",
                        *hpayloads,
                        "--iters-scale",
                        "0.4",
                    ],
                    600,
                    env={"PYTHONPATH": pythonpath},
                )
            )
            notes.append(
                f"torch_horovod benchmarked with {hpy} (horovodrun --gloo, ws=2), this tree's core "
                "and plugin on PYTHONPATH"
            )
        else:
            notes.append(f"horovod not benchmarked: {why}")
    old_py: Optional[str] = None
    if parts & {"mmeval021", "compute", "detection"} and not args.no_mmeval021:
        try:
            old_py = str(mmeval021_env.ensure(mmeval021_env.default_venv()))
        except RuntimeError as exc:
            notes.append(f"MMEval 0.2.1 not run: {exc}; compare with /work/shared/perf-baseline.md")
    if "mmeval021" in parts and old_py is not None:
        # what the targets need (100k tuples; 1 KB and 64 MB for context at ws=2), MMEval 0.2.1's two collectives
        for backend in ("torch_cpu", "mpi4py"):
            for ws in sizes:
                sel = ["dict1k", "arr64m", "tuples100k"] if ws == 2 else ["dict1k", "tuples100k"]
                jobs.append(
                    Job(
                        "mmeval021",
                        f"MMEval 0.2.1 {backend} ws={ws}",
                        [
                            old_py,
                            str(HERE / "collectives.py"),
                            "--impl",
                            "mmeval021",
                            "--backend",
                            backend,
                            "--world-size",
                            str(ws),
                            "--payloads",
                            *sel,
                            "--ops",
                            "all_gather",
                            "broadcast",
                            "--only",
                            "mmeval",
                            "raw",
                            "raw_prealloc",
                            "--timeout",
                            "540",
                            *(scale or (["--iters-scale", "0.6"] if ws == 4 else [])),
                        ],
                        600,
                    )
                )
    if "compute" in parts:
        iters = ["--iters", "2" if quick else "5"]
        for backend in ("torch_cpu", "mpi4py"):
            for ws in sizes:
                jobs.append(
                    Job(
                        "compute",
                        f"compute ours {backend} ws={ws}",
                        [
                            py,
                            str(HERE / "compute.py"),
                            "--impl",
                            "ours",
                            "--backend",
                            backend,
                            "--world-size",
                            str(ws),
                            *iters,
                        ],
                        600,
                    )
                )
                if old_py is not None:  # 0.2.1's compute() takes seconds: fewer iterations
                    jobs.append(
                        Job(
                            "compute",
                            f"compute MMEval 0.2.1 {backend} ws={ws}",
                            [
                                old_py,
                                str(HERE / "compute.py"),
                                "--impl",
                                "mmeval021",
                                "--backend",
                                backend,
                                "--world-size",
                                str(ws),
                                "--iters",
                                "2" if quick or ws > 2 else "3",
                            ],
                            900,
                        )
                    )
    if "metrics" in parts:
        small = ["--accuracy-samples", "200000", "--iou-images", "100", "--ap-samples", "50000", "--iters", "2"]
        has_mpi = _importable(py, "import mpi4py.MPI")[0] and shutil.which(
            "mpiexec", path=os.path.dirname(py) + os.pathsep + os.environ.get("PATH", "")
        )
        for backend in ("torch_cpu", "mpi4py") if has_mpi else ("torch_cpu",):
            for ws in sizes:
                jobs.append(
                    Job(
                        "metrics",
                        f"metrics {backend} ws={ws}",
                        [
                            py,
                            str(HERE / "metrics.py"),
                            "--backend",
                            backend,
                            "--world-size",
                            str(ws),
                            *(small if quick else []),
                        ],
                        900,
                    )
                )
    if "catalogue" in parts:
        has_mpi = _importable(py, "import mpi4py.MPI")[0] and shutil.which(
            "mpiexec", path=os.path.dirname(py) + os.pathsep + os.environ.get("PATH", "")
        )
        for backend in ("torch_cpu", "mpi4py") if has_mpi else ("torch_cpu",):
            jobs.append(
                Job(
                    "catalogue",
                    f"catalogue {backend} ws=2",
                    [
                        py,
                        str(HERE / "catalogue.py"),
                        "--backend",
                        backend,
                        "--world-size",
                        "2",
                        "--iters",
                        "1" if quick else "3",
                    ],
                    900,
                )
            )
    if "exactsum" in parts:
        cmd = [py, str(HERE / "exact_sums.py"), "--backend", "torch_cpu", "--world-size", "2"]
        jobs.append(Job("exactsum", "exact float sums torch_cpu ws=2", cmd + ["--iters", "1" if quick else "5"], 600))
    if "detection" in parts:
        jobs += detection_jobs(args, py, old_py, notes)
    if "collection" in parts:
        cmd = [py, str(HERE / "collection.py"), "--world-size", "2", *(["--quick", "--iters", "1"] if quick else [])]
        jobs.append(Job("collection", "collection torch_cpu ws=2", cmd, 600))
    if "startup" in parts:
        jobs.append(Job("startup", "start-up", [py, str(HERE / "startup.py"), "--reps", "3" if quick else "9"], 600))
    if "codec" in parts:
        jobs.append(Job("codec", "codecs", [py, str(HERE / "codec.py"), "--reps-scale", "0.3" if quick else "1"], 600))
    return jobs


def detection_jobs(args: argparse.Namespace, py: str, old_py: Optional[str], notes: List[str]) -> List[Job]:
    """The detection part: one single-process job (the references and ours), then the distributed runs."""
    script = str(HERE / "detection.py")
    # ours' sub-second ws=2 totals move by ~0.1 s with the machine's load: the median of 5 (torchmetrics and
    # MMEval 0.2.1 run once whatever this says: tens of seconds each)
    size = ["--quick", "--iters", "1", "--warmup", "0"] if args.quick else ["--iters", "5", "--warmup", "1"]
    jobs = [
        Job(
            "detection",
            "detection single process (pycocotools, faster-coco-eval, ours)",
            [py, script, "--mode", "single", *(["--quick", "--iters", "2"] if args.quick else ["--iters", "3"])],
            900,
        )
    ]
    dist = [py, script, "--mode", "dist", *size]
    # ours and torchmetrics in jobs of their own: in one job, ours' segm ws=2 add() ran ~1.7x slower after
    # torchmetrics' lvis run (0.45 s against 0.25-0.27 s in the other jobs), moving the ws=2 ratio 0.5 -> 0.95
    # ours in a job per case: rank 0's peak memory (VmHWM) in one case's compute() would otherwise count
    # pages of the heap an earlier, bigger case freed (lvis after bbox in one job: 7.8 MB; alone: 3.0 MB)
    cases = ("bbox", "lvis", "segm")

    def ours(backend: str, ws: int) -> List[Job]:
        return [
            Job(
                "detection",
                f"detection ours {backend} ws={ws} {case}",
                [*dist, "--backend", backend, "--world-size", str(ws), "--impl", "ours", "--cases", case],
                600,
            )
            for case in cases
        ]

    jobs += ours("torch_cpu", 2)
    jobs.append(
        Job(
            "detection",
            "detection torchmetrics torch_cpu ws=2",
            [*dist, "--backend", "torch_cpu", "--world-size", "2", "--impl", "torchmetrics"],
            900,
        )
    )
    jobs += ours("torch_cpu", 3)
    has_mpi = _importable(py, "import mpi4py.MPI")[0] and shutil.which(
        "mpiexec", path=os.path.dirname(py) + os.pathsep + os.environ.get("PATH", "")
    )
    if has_mpi:
        jobs += ours("mpi4py", 2)
    else:
        notes.append("detection on mpi4py not run: mpi4py or mpiexec missing")
    if old_py is not None:  # 0.2.1 gathers every image's dicts and runs pycocotools on rank 0: the bbox case only
        jobs.append(
            Job(
                "detection",
                "detection MMEval 0.2.1 torch_cpu ws=2",
                [
                    old_py,
                    script,
                    "--mode",
                    "dist",
                    "--backend",
                    "torch_cpu",
                    "--world-size",
                    "2",
                    "--impl",
                    "mmeval021",
                    "--cases",
                    "bbox",
                    *(["--quick"] if args.quick else []),
                ],
                900,
            )
        )
    # issue 34: the Objects365-like case (80k images, 1.2M detections; --quick: 2,000), ultrafast-pycocotools'
    # one process beside ours at world sizes 1, 2 and 4 (wall time, bytes per detection, every rank's peak)
    o365 = ["--cases", "objects365", "--iters", "1", *(["--quick"] if args.quick else [])]
    jobs.append(
        Job(
            "detection",
            "detection objects365 single process (ultrafast-pycocotools, ours)",
            [py, script, "--mode", "single", "--refs", "ultrafast-pycocotools", "ours", "--no-rust2", *o365],
            900,
        )
    )
    for ws in (2, 4):
        jobs.append(
            Job(
                "detection",
                f"detection ours torch_cpu ws={ws} objects365",
                [py, script, "--mode", "dist", "--backend", "torch_cpu", "--world-size", str(ws), "--impl", "ours"]
                + ["--warmup", "0", "--no-single-beside", *o365],
                900,
            )
        )
    return jobs


def _kill_tree(proc: "subprocess.Popen[bytes]") -> None:
    """Stop a job's whole session: SIGTERM (launchers such as horovodrun then stop the ranks they
    started in sessions of their own), then SIGKILL what is left of the group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_job(job: Job, tmp: Path, index: int) -> Optional[str]:
    """Run one job (its output streams through); ``None`` if it succeeded, else why not."""
    job.out = tmp / f"{index:02d}-{job.part}.json"
    cmd = [*job.cmd, "--out", str(job.out)]
    print(f"\n== [{index}] {job.title}: {' '.join(cmd[1:3])} ... (load {os.getloadavg()[0]:.2f})", flush=True)
    t0 = time.monotonic()
    # its own session: on timeout the whole tree (launcher and ranks) is killed, not just the launcher
    proc = subprocess.Popen(cmd, env=_child_env(job.env), cwd=str(REPO), start_new_session=True)
    try:
        code = proc.wait(timeout=job.timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        return f"{job.title}: killed after {job.timeout:g}s"
    except BaseException:  # Ctrl-C, tox stopping us: take the ranks down too
        _kill_tree(proc)
        raise
    print(f"   ({time.monotonic() - t0:.0f}s)", flush=True)
    if code != 0:
        return f"{job.title}: exit status {code}"
    if not job.out.exists():
        return f"{job.title}: wrote no results"
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer payloads, sizes and iterations")
    parser.add_argument("--no-mmeval021", action="store_true", help="skip MMEval 0.2.1 (its env is not built)")
    parser.add_argument("--no-horovod", action="store_true")
    parser.add_argument("--out-dir", type=Path, default=REPO / "docs", help="where benchmarks.{json,md,png} go")
    parser.add_argument(
        "--keep-other-parts",
        action="store_true",
        help="keep the runs of the parts not given to --parts from the out-dir's benchmarks.json "
        "(re-measure one part, keep the rest of the document)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    machine = common.machine_info()
    print(
        f"mmeval benchmark suite on {machine['cpu_model']} x{machine['cpus']}, load {machine['loadavg']}, "
        f"{machine['mem_available_gib']} GiB free",
        flush=True,
    )
    notes: List[str] = []
    jobs = plan(args, notes)
    for note in notes:
        print("note: " + note, flush=True)
    errors: List[str] = []
    runs: List[Dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mmeval-bench-") as tmpdir:
        tmp = Path(tmpdir)
        for i, job in enumerate(jobs):
            load_before = os.getloadavg()[0]
            why = run_job(job, tmp, i)
            if why is not None:
                errors.append(why + (" (partial results kept)" if job.out is not None and job.out.exists() else ""))
                print("   FAILED: " + why, flush=True)
            if job.out is None or not job.out.exists():
                continue
            data = report.load(job.out)
            runs.append(
                {
                    "part": job.part,
                    "title": job.title,
                    "meta": data.get("meta", {}),
                    "load_before": load_before,
                    "load_after": os.getloadavg()[0],
                }
            )
            for rec in data["records"]:
                rec.setdefault("impl", "ours")
                rec["run"] = job.title
            runs[-1]["records"] = data["records"]
    previous = args.out_dir / "benchmarks.json"
    kept_source: Optional[Dict[str, Any]] = None
    if args.keep_other_parts and previous.exists():
        old = report.load(previous)
        kept = [run for run in old.get("runs", []) if run.get("part") not in args.parts]
        if kept:
            # where the kept runs come from: the run that measured them (carried over when it was itself a re-run)
            old_meta = old.get("meta", {})
            source = old_meta.get("kept_source") or {
                "time": old_meta.get("machine", {}).get("time", "?"),
                "command": old_meta.get("command", "?"),
                "loadavg": old_meta.get("machine", {}).get("loadavg"),
                "notes": old_meta.get("notes", []),
                "versions": old_meta.get("versions", {}),
            }
            kept_source = source
            notes.append(
                f"parts {', '.join(sorted({r['part'] for r in kept}))} kept from the run of "
                f"{source['time']} (`{source['command']}`, load {source['loadavg']}); "
                f"{', '.join(args.parts)} measured now"
            )
            notes += [
                f"(that run) {n}"
                for n in source.get("notes", [])
                if not n.startswith("parts ") and not n.startswith("(that run)")
            ]
            runs = sorted(kept + runs, key=lambda r: PARTS.index(r["part"]) if r["part"] in PARTS else len(PARTS))
    result = {
        "meta": {
            "machine": machine,
            "machine_at_end": common.machine_info(),
            "command": "tox -e bench" if os.environ.get("TOX_ENV_NAME") else "python " + " ".join(sys.argv),
            "quick": args.quick,
            "seconds": round(time.monotonic() - started, 1),
            "notes": notes,
            "errors": errors,
            "allocator": common.MALLOC_PIN,
            "python": sys.version.split()[0],
            "versions": report.versions(),
            **({"kept_source": kept_source} if kept_source else {}),
        },
        "runs": runs,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    common.write_json(args.out_dir / "benchmarks.json", result)
    text = report.render(result, args.out_dir)
    print("\n" + text)
    print(
        f"\nwrote {args.out_dir / 'benchmarks.json'}, benchmarks.md and benchmarks.png "
        f"in {result['meta']['seconds']:.0f}s",
        flush=True,
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
