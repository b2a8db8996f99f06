"""New gloo groups whose rendezvous cannot read a previous group's addresses.

``paddle.distributed.new_group`` (paddle 3.3.1, gloo) connects the new
``ProcessGroupGloo`` through the default store under the keys ``"0"``,
``"1"``, ... with no prefix: the keys every earlier group wrote. A rank that
reads a peer's key before that peer has written it for the new group gets
the previous group's address, whose listener is closed, and the creation
fails (``connect ...: Connection refused``) or hangs. Three processes that
create groups one after another hit it within 3 to 8 groups here, with or
without a barrier in between. Recovering from a poisoned group needs a new
group, so this module gives one that does not race:
:func:`new_group` rendezvouses each group through a store of its own, whose
address is exchanged under a key used once.

This module does not import paddle; :func:`new_group` does.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
from typing import Any, List, Optional, Sequence

__all__ = ["new_group", "GROUP_ID_BASE"]

#: Group ids given by :func:`new_group` start here, far above the ring ids paddle hands out itself.
GROUP_ID_BASE = 1 << 30

_calls = itertools.count()
_lock = threading.Lock()
#: The stores of the groups made here (a master's store serves its group's rendezvous; kept for the process).
_stores: List[Any] = []


def _host() -> str:
    """This node's address as the other ranks reach it (the launcher's endpoint for this rank)."""
    endpoint = os.environ.get("PADDLE_CURRENT_ENDPOINT", "")
    return endpoint.rsplit(":", 1)[0] if ":" in endpoint else "127.0.0.1"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def new_group(ranks: Optional[Sequence[int]] = None, *, timeout: float = 300.0) -> Any:
    """A ``paddle.distributed`` gloo group of ``ranks`` (global ranks; ``None``: every rank).

    Call it on every rank of the job, in the same order as any other
    ``new_group`` call, as ``paddle.distributed.new_group`` must be; it returns
    a ``paddle.distributed.communication.group.Group`` to give to
    :class:`~mmeval_paddle.PaddleDist` (``PaddleDist(new_group())``). A rank
    outside ``ranks`` gets a group it is not a member of (``rank`` -1), as
    from paddle's ``new_group``. The lowest member starts a ``TCPStore`` for
    the group's rendezvous and publishes its address in the default store
    under a key of this call's own; ``timeout`` bounds the rendezvous
    (seconds). Requires ``init_parallel_env()`` with gloo (CPU).
    """
    import paddle.distributed as dist
    from paddle.base import core
    from paddle.distributed import collective
    from paddle.distributed.communication.group import Group

    world = int(dist.get_world_size())
    members = sorted(set(range(world) if ranks is None else (int(r) for r in ranks)))
    if not members or members[0] < 0 or members[-1] >= world:
        raise ValueError(f"mmeval_paddle.new_group: ranks must be global ranks in [0, {world}), got {ranks!r}")
    initialized = bool(dist.is_initialized())
    if not initialized and world > 1:
        raise RuntimeError("mmeval_paddle.new_group: call paddle.distributed.init_parallel_env() first")
    with _lock:
        call = next(_calls)
    gid = GROUP_ID_BASE + call
    name = f"mmeval_paddle_group_{call}"
    me = int(dist.get_rank())
    if me not in members or not initialized:  # one process: no process group, as paddle's new_group([0]) there
        return Group(-1, gid, members, pg=None, name=name)
    default_store = collective._default_store
    if default_store is None:
        raise RuntimeError("mmeval_paddle.new_group: paddle has no default store (init_parallel_env() with gloo?)")
    key = f"mmeval_paddle/new_group/{call}"
    rank, size, seconds = members.index(me), len(members), max(1, int(timeout))
    # world_size 1 on every side: the master does not wait in its constructor for the others to connect
    # (it would before publishing its address), and the gloo rendezvous waits for every member's key anyway
    if rank == 0:
        host = _host()
        store = None
        for _ in range(5):  # the free port may be taken between finding it and the store binding it
            port = _free_port(host)
            try:
                store = core.TCPStore(host, port, True, 1, seconds)
                break
            except Exception:  # a bind error from paddle's C++: try another port
                continue
        if store is None:
            raise RuntimeError(f"mmeval_paddle.new_group: could not start a store for group {name} on {host}")
        default_store.set(key, f"{host}:{port}")
    else:
        default_store.wait(key)
        address = default_store.get(key).decode()
        host, port_text = address.rsplit(":", 1)
        store = core.TCPStore(host, int(port_text), False, 1, seconds)
    _stores.append(store)
    pg = core.ProcessGroupGloo.create(store, rank, size, gid)
    return Group(rank, gid, members, pg=pg, name=name)
