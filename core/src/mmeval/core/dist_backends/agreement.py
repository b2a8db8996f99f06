"""What the ranks' slot headers must agree on, and the errors that name each rank when they do not.

After the header exchange every rank checks every rank's header the same way,
so that a serialization error on one rank, ranks calling different
collectives, or ranks asking different questions (a metric's configuration,
``compute(size=...)``, the calling thread) raise the same error on every rank.
"""

from __future__ import annotations

from typing import List, Optional

from ..errors import CollectiveMismatchError, RemoteSerializationError
from ..wire import CODEC_IDS, Op, SlotHeader, Status, question_fields
from .transport import Call

__all__ = ["check_headers", "check_question"]

_CODEC_NAMES = {v: k for k, v in CODEC_IDS.items()}


def check_headers(
    name: str, headers: List[SlotHeader], call: Call, local_exc: Optional[BaseException], serialize_hint: str
) -> None:
    """Raise on every rank when a rank could not encode, the ranks called different collectives, or asked differently."""
    failed = [(r, h) for r, h in enumerate(headers) if h.status != Status.OK]
    if failed:
        detail = "; ".join(f"rank {r}: {h.error_text()}" for r, h in failed)
        one = len(failed) == 1
        raise RemoteSerializationError(
            f"{name}: {call.op} (collective #{call.seq}) aborted on every rank because "
            f"{'rank' if one else 'ranks'} {', '.join(str(r) for r, _ in failed)} "
            f"could not serialize {'its' if one else 'their'} object ({detail}). {serialize_hint}"
        ) from local_exc
    if len({(h.op, h.root, h.seq, h.codec) for h in headers}) != 1:

        def describe(h: SlotHeader) -> str:
            arg = {Op.GATHER: "dst", Op.REDUCE: "dst", Op.BROADCAST: "src"}.get(h.op)
            where = f"{arg}={h.root}" if arg else ""
            return f"{h.op_name}({where}) #{h.seq} codec={_CODEC_NAMES.get(h.codec, '?')}"

        detail = "; ".join(f"rank {r}: {describe(h)}" for r, h in enumerate(headers))
        hint = "Every rank must call the same collectives, in the same order, with the same src/dst and codec."
        if len({h.seq for h in headers}) > 1:
            hint += " The sequence numbers differ: a rank called more collectives than the others."
        raise CollectiveMismatchError(f"{name}: ranks disagree on the collective ({detail}). {hint}")
    check_question(name, headers, call)


def check_question(name: str, headers: List[SlotHeader], call: Call) -> None:
    """Raise on every rank when the ranks asked different questions (see :func:`~.transport.asking`).

    Each differing field is named with every rank's value; a value too long to
    show, or shown the same on every rank, differs in its digest (past what is shown).
    """
    if len({h.question for h in headers}) == 1:
        return
    asked = [question_fields(h.question) for h in headers]
    missing = ("(not asked)", "")
    fields = sorted(set().union(*asked))
    differ = [f for f in fields if len({a.get(f, missing) for a in asked}) > 1]
    parts = []
    for f in differ:
        texts = [a.get(f, missing)[0] for a in asked]
        line = f"{f}: " + ", ".join(f"rank {r}={t}" for r, t in enumerate(texts))
        if len(set(texts)) == 1:
            line += " (the values differ past what is shown: compare them in full)"
        parts.append(line)
    hint = (
        "Every rank must ask the same question: the same metric configuration, dist_collect_mode and "
        "size= in compute()."
    )
    if "thread" in differ:
        hint += " The calling threads differ: make the matching calls from the same thread on every rank."
    raise CollectiveMismatchError(
        f"{name}: {call.op} (collective #{call.seq}): ranks asked different questions ({'; '.join(parts)}). {hint}"
    )
