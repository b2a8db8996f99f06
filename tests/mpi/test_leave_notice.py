"""Issue 33 item 1: a rank that leaves outside a collective is named by its peers within seconds, with its reason.

``programs/leave_notice.py`` under ``mpiexec -n 3``: ranks 0 and 1 leave (an
uncaught exception at ``add()``, ``sys.exit(3)``, the end of the script
without ``compute()``, SIGTERM, or the end of the script after one
``compute()`` with the others); rank 2 calls ``compute()``. Before the leave
notices, rank 2 waited its whole timeout (here 60 s; 1800 s by default) while
the others sat in ``MPI_Finalize``. Now it raises a CollectiveFailedError
naming rank 0 or 1 and why it left, in well under a second of its call.

SIGTERM: Hydra ends the whole job the moment one of its direct children dies
by a signal (whatever ``-disable-auto-cleanup`` says), and Open MPI's launcher
when a rank exits with a non-zero status -- the job ends either way, in
seconds. So the SIGTERM case runs each rank under a shell parent (which ignores the
SIGUSR1 Hydra sends the survivors' process groups then) with the
implementation's option that keeps the job alive (``-disable-auto-cleanup``),
so that the survivor's own error is what ends it; under Open MPI the
launcher's abort is accepted.
"""

from __future__ import annotations

import pytest
from mpi_runner import MPIImpl, run_program

#: The survivors' collective timeout: waiting it out fails the test's time bound.
TIMEOUT = 60
#: Seconds from the survivor's compute() to its error (measured: ~0.2 s with MPICH on 3 oversubscribed ranks).
BOUND = 10.0

WHY = {
    "raise": "an uncaught ValueError: predictions and labels have different lengths",
    "exit": "the process exited",
    "normal": "the process exited",
    "late": "the process exited",
    "sigterm": "signal SIGTERM",
}


@pytest.mark.parametrize("how", list(WHY))
def test_a_rank_that_leaves_is_named_by_its_peers(mpiexec: str, mpi_impl: MPIImpl, how: str) -> None:
    keep_alive = mpi_impl.survive_rank_exit if how == "sigterm" else ()
    shell = ("sh", "-c", 'trap : USR1; "$@"; exit $?', "sh") if how == "sigterm" else ()
    run = run_program(
        mpiexec,
        "leave_notice.py",
        3,
        how,
        timeout=TIMEOUT + 60,
        env={"MMEVAL_MPI4PY_TIMEOUT": str(TIMEOUT)},
        launcher_args=keep_alive,
        prefix=shell,
    )
    if how == "sigterm" and mpi_impl.name == "openmpi" and 2 not in run.results:
        assert run.seconds < BOUND + 20 and run.returncode != 0, run.describe()  # PRRTE ended the job
        return
    run.expect_ranks([2])
    info = run.results[2]["info"]
    assert info["seconds"] < BOUND, run.describe()
    error = info["error"]
    assert error.startswith("CollectiveFailedError: mpi4py:"), error
    assert "rank 0 " in error or "rank 1 " in error, error
    assert "left after completing" in error and WHY[how] in error, error
    collective = "#2" if how == "late" else "#1"
    assert f"never join collective {collective}" in error, error
    assert run.returncode != 0 and run.seconds < TIMEOUT, run.describe()


def test_a_memory_error_on_rank_1_names_rank_1_and_the_step(mpiexec: str) -> None:
    """Issue 33 item 4: rank 1 cannot allocate its send buffer in compute()'s gather (a real MemoryError).

    Rank 1 raises naming itself, the operation and the step; rank 0 raises at
    once naming rank 1, the step and the MemoryError (rank 1 told it), not
    after its timeout, and not as its own error.
    """
    run = run_program(mpiexec, "memory_error.py", 2, timeout=TIMEOUT + 60, env={"MMEVAL_MPI4PY_TIMEOUT": str(TIMEOUT)})
    assert set(run.results) == {0, 1}, run.describe()
    own, told = run.results[1]["info"], run.results[0]["info"]
    assert "MemoryError" in own["error"] and "on rank 1 of 2" in own["error"], own
    assert "gather_object" in own["error"] and "payloads" in own["error"], own
    assert told["error"].startswith("CollectiveFailedError"), told
    for text in ("rank 1 (host", "gather_object (collective #", "failed on it while gathering payloads", "MemoryError"):
        assert text in told["error"], told["error"]
    assert told["seconds"] < BOUND, told
