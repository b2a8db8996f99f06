"""Hook implementations discovered through the mmeval.hooks entry-point group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap


def test_entry_point_hook_receives_events(tmp_path):
    log = tmp_path / "events.jsonl"
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, %r)
        from hub_backend import HubDist, free_port
        b = HubDist(0, 1, ("127.0.0.1", free_port()))
        # a world of one short-circuits: use the machinery directly with ws=1 by faking nothing;
        # instead run a real two-rank exchange through run_ranks
        from hub_backend import run_ranks
        import framed_workers as w
        out = run_ranks(w.collectives, 2, False)
        assert all(s == "ok" for s, _ in out.values()), out
    """
        % os.path.dirname(os.path.dirname(__file__))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    env["MMEVAL_FIXTURE_HOOK_LOG"] = str(log)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    ops = {e["op"] for e in events}
    assert {"all_gather_object", "gather_object", "broadcast_object", "barrier"} <= ops
    assert {e["rank"] for e in events} == {0, 1}
    assert all(e["backend"] == "hub" and e["outcome"] == "ok" and e["seconds"] >= 0 for e in events)


def test_no_pluggy_without_hooks():
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, %r)
        from hub_backend import run_ranks
        import framed_workers as w
        from mmeval.core import hooks
        assert not hooks.hooks_active()
        print("pluggy" in sys.modules)
    """
        % os.path.dirname(os.path.dirname(__file__))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    env["MMEVAL_DISABLE_PLUGINS"] = "mmeval-fixture-rival"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_comm_stats_env_prints_table_at_exit():
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, %r)
        from hub_backend import run_ranks
        import framed_workers as w
        out = run_ranks(w.collectives, 2, False)
    """
        % os.path.dirname(os.path.dirname(__file__))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    env["MMEVAL_COMM_STATS"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    # the ranks are child processes: each prints its own table to stderr at exit
    assert proc.stderr.count("mmeval communication stats (rank") == 2
    assert "all_gather_object" in proc.stderr and "from 1" in proc.stderr
