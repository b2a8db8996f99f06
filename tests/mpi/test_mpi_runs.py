"""Real MPI processes: the programs of tests/mpi/programs under ``mpiexec -n 1..4`` and with no launcher.

World sizes 3 and 4 run oversubscribed on small machines; the backend sleeps
between polls, so waiting ranks leave the cores to the ranks doing work.
"""

from __future__ import annotations

import os
from typing import Optional

import pytest
from mpi_runner import MPIImpl, MPIRun, run_program

SIZES = [2, 3, 4]
#: Seconds a fault run's collectives wait before giving up.
FAULT_TIMEOUT = 6.0


@pytest.mark.parametrize("n", [None, 1, 2, 3, 4], ids=lambda n: "no-launcher" if n is None else f"np{n}")
def test_nothing_imports_mpi_before_use(mpiexec: str, n: Optional[int]) -> None:
    """Plugin import, listing, construction, detect() and auto-selection leave mpi4py.MPI unimported."""
    run = run_program(mpiexec, "no_mpi_init.py", n, timeout=120)
    ranks = range(n or 1)
    run.expect_success(n or 1)
    distributed = (n or 1) > 1
    for r in ranks:
        res = run.results[r]
        assert res["detect"] is distributed, run.describe()
        assert res["is_initialized"] == [distributed] * 4, run.describe()
        assert res["auto"] == ("mpi4py" if distributed else "non_dist"), run.describe()


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"np{n}")
def test_collectives(mpiexec: str, n: int) -> None:
    """all_gather / gather / broadcast / barrier: nested, empty, 64 MB, uneven, derived datatypes, Split."""
    run = run_program(mpiexec, "collectives.py", n, timeout=300)
    run.expect_success(n)


@pytest.mark.parametrize("n", [None, 1, *SIZES], ids=lambda n: "no-launcher" if n is None else f"np{n}")
def test_evaluation_matches_one_process(mpiexec: str, n: Optional[int]) -> None:
    """Accuracy over padded, uneven and contiguous shards equals the single-process result on every rank."""
    run = run_program(mpiexec, "evaluate.py", n, timeout=240)
    run.expect_success(n or 1)
    expected = {r: res["info"]["expected"] for r, res in run.results.items()}
    assert len({str(v) for v in expected.values()}) == 1
    assert all(res["info"]["auto"] == ("mpi4py" if (n or 1) > 1 else "non_dist") for res in run.results.values())


@pytest.mark.parametrize("n", [1, 2, 3], ids=lambda n: f"np{n}")
def test_conformance_suite_with_the_terminal_checks(mpiexec: str, n: int) -> None:
    """The conformance suite, faults included: poisoning, two threads at once, Ctrl-C while waiting."""
    run = run_program(mpiexec, "conformance.py", n, timeout=300)
    # every rank reported a pass; the exit code is not checked: a process whose communicator was poisoned
    # calls MPI_Abort at exit (MPI_Finalize could wait forever for a request left pending), as documented
    run.expect_ranks(range(n))
    for res in run.results.values():
        checks = res["info"]["checks"]
        assert "question_mismatch" in checks, run.describe()
        if n > 1:
            assert {"poisoning", "concurrent_calls", "interrupt"} <= set(checks), run.describe()


def test_tutorial_launch_with_mpirun(mpiexec: str) -> None:
    """The tutorial's ``mpirun -np 3 python3 ...`` flow."""
    mpirun = os.path.join(os.path.dirname(mpiexec), "mpirun")
    if not os.path.exists(mpirun):  # pragma: no cover - an MPI without the alias
        pytest.skip(f"no mpirun next to {mpiexec}")
    run = run_program(mpirun, "evaluate.py", 3, timeout=240, count_flag="-np")
    run.expect_success(3)


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"np{n}")
@pytest.mark.parametrize("scenario", ["unpicklable", "compute-error", "mismatch"])
def test_faults_every_rank_raises(mpiexec: str, scenario: str, n: int) -> None:
    """An unpicklable object, a failing compute_metric, mismatched calls: every rank raises, nobody hangs."""
    run = run_program(mpiexec, "faults.py", n, scenario, timeout=120)
    run.expect_success(n)


def test_a_freed_communicators_handle_reused_starts_clean(mpiexec: str) -> None:
    """MPI reuses a freed communicator's handle: the new group must not inherit the old one's poison or sequence."""
    run = run_program(mpiexec, "faults.py", 2, "recycled", timeout=120, env={"MMEVAL_MPI4PY_ABORT_AT_EXIT": "0"})
    run.expect_success(2)


@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"np{n}")
@pytest.mark.parametrize("scenario", ["exit-before", "exit-during"])
def test_rank_exit_survivors_raise_in_time(mpiexec: str, mpi_impl: MPIImpl, scenario: str, n: int) -> None:
    """A rank exits before / in the middle of a collective: the survivors raise within the timeout.

    The launcher kills the whole job when a rank dies unless told not to
    (Hydra: ``-disable-auto-cleanup``; Open MPI: ``--enable-recovery``, with the
    rank exiting with status 0, as Open MPI ends the job on any other), so it
    is. The survivors raise a DistCommunicationError naming the
    operation and the backend, the communicator then refuses further
    collectives at once, and the job ends (MPI_Abort at exit) instead of waiting
    in MPI_Finalize for the dead rank.
    """
    grace = 3.0

    def launch() -> MPIRun:
        return run_program(
            mpiexec,
            "faults.py",
            n,
            scenario,
            timeout=90,
            launcher_args=mpi_impl.survive_rank_exit,
            env={
                "MMEVAL_MPI4PY_TIMEOUT": str(FAULT_TIMEOUT),
                "MMEVAL_TEST_GRACE": str(grace),
                "MMEVAL_TEST_EXIT_CODE": str(mpi_impl.rank_exit_status),
            },
        )

    try:
        run = launch()
    except pytest.fail.Exception as exc:
        # Open MPI's PRRTE launcher was once seen (1 run in ~20, on a loaded machine) never to exit after
        # every survivor had reported a clean timeout and called MPI_Abort: a launcher hang, after our part
        # was done. Only that case is retried, once; the retry must pass every check below.
        text = str(exc)
        if mpi_impl.name != "openmpi" or "MPI_ABORT was invoked" not in text or text.count('"failures": []') < n - 1:
            raise
        run = launch()
    survivors = range(n - 1)
    run.expect_ranks(survivors)
    assert n - 1 not in run.results, run.describe()
    for r in survivors:
        info = run.results[r]["info"]
        assert info["seconds"] < FAULT_TIMEOUT + 5, run.describe()
        assert "all_gather_object" in info["error"] and "mpi4py" in info["error"], info["error"]
        phase = "exchanging headers" if scenario == "exit-before" else "exchanging payloads"
        assert phase in info["error"], info["error"]
    if mpi_impl.name == "openmpi":
        # under --enable-recovery PRRTE's exit status is the first exiting rank's (the dying one's 0), not
        # the survivors' MPI_Abort: that the survivors aborted shows in its report instead
        assert "MPI_ABORT was invoked" in run.stderr + run.stdout, run.describe()
    else:
        assert run.returncode != 0, "the job must end with an error code (a rank exited, survivors aborted)"
    assert run.seconds < 60, run.describe()


def test_large_send_buffers_are_not_kept_after_the_collective(mpiexec: str) -> None:
    """Issue 20 item 10: a non-root rank kept its whole staged frame (+172 MiB) pooled after compute()."""
    run = run_program(mpiexec, "send_buffers.py", 2, timeout=120)
    run.expect_success(2)


def test_a_rank_leaving_before_mpi_starts_does_not_hang_the_others(mpiexec: str) -> None:
    """Issue 20 item 12: the last of 3 ranks exits 0 before compute(); MPI_Init waits for it forever.

    The first use of the backend starts MPI on the others, inside compute():
    the backend's timeout bounds that start-up too. The first of the other
    ranks to reach its timeout ends with a message on stderr naming it, its
    rank and what to do (the launcher then ends the rest of the job, maybe
    before another rank's own message), and the job ends with an error status.
    """
    run = run_program(
        mpiexec, "leave_before_compute.py", 3, timeout=60, env={"MMEVAL_MPI4PY_TIMEOUT": str(FAULT_TIMEOUT)}
    )
    assert "MMEVAL-COMPUTED" not in run.stdout, run.describe()
    for r in (0, 1):
        assert f"rank {r}: computing" in run.stdout, run.describe()
    ours = any(f"mmeval mpi4py: rank {r} of 3: starting MPI" in run.stderr for r in (0, 1))
    if ours:
        assert f"within {FAULT_TIMEOUT:g}s" in run.stderr and "Import mpi4py.MPI at the start" in run.stderr
    else:  # the launcher ended the job first (Open MPI's may, for a rank that left before MPI_Init): no hang
        assert "terminat" in run.stderr.lower() or "abort" in run.stderr.lower(), run.describe()
    assert run.returncode != 0, run.describe()
    assert run.seconds < FAULT_TIMEOUT + 20, run.describe()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MMEVAL_MPI_BIG") != "1", reason="set MMEVAL_MPI_BIG=1: needs ~10 GB of RAM")
@pytest.mark.parametrize("large_count", ["auto", "datatype"])
def test_objects_over_2gib(mpiexec: str, large_count: str) -> None:
    """A real broadcast and gather of a 2 GiB + 4 KiB array (MPI-4 large counts, or a derived datatype)."""
    run = run_program(
        mpiexec, "collectives.py", 2, "--big", timeout=590, env={"MMEVAL_MPI4PY_LARGE_COUNT": large_count}
    )
    run.expect_success(2)
