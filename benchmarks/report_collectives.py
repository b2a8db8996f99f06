"""The object collectives' family: its targets, its tables and its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List

from report_common import (
    BACKENDS,
    OPS,
    PAYLOAD_ORDER,
    Target,
    best_raw,
    collective_index,
    floor_raw,
    fmt_bytes,
    fmt_ms,
    fmt_ratio,
    med,
    table,
    where,
)


def targets_vs_mmeval021(result: Dict[str, Any]) -> List[Target]:
    """tuples100k against MMEval 0.2.1 and against raw gloo (issue 7, target 1)."""
    idx = collective_index(result)
    sizes = sorted({k[2] for k in idx if k[0] == "ours"})
    out: List[Target] = []
    for backend in ("torch_cpu", "mpi4py"):
        for ws in sizes:
            old = med(idx, ("mmeval021", backend, ws, "all_gather", "tuples100k", "mmeval"))
            for op in ("all_gather", "gather"):
                ours = med(idx, ("ours", backend, ws, op, "tuples100k", "mmeval"))
                if ours is None:
                    continue
                value = old / ours if old is not None else None
                out.append(
                    Target(
                        f"tuples100k {op}_object ≥10x faster than MMEval 0.2.1",
                        where(backend, ws),
                        f"{fmt_ms(old)} ms (0.2.1 all_gather) / {fmt_ms(ours)} ms",
                        value,
                        10,
                        True,
                        note="0.2.1 has no gather_object; its compute() all-gathers",
                    )
                )
    for ws in sizes:
        for op in ("all_gather", "gather"):
            ours = med(idx, ("ours", "torch_cpu", ws, op, "tuples100k", "mmeval"))
            raw = best_raw(idx, "ours", "torch_cpu", ws, op, "tuples100k")
            floor = floor_raw(idx, "ours", "torch_cpu", ws, op, "tuples100k")
            if ours is not None and raw is not None:
                out.append(
                    Target(
                        f"tuples100k {op}_object ≤5x raw gloo",
                        f"torch_cpu ws={ws}",
                        f"{fmt_ms(ours)} / {fmt_ms(raw)} ms",
                        ours / raw,
                        5,
                        floor=ours / floor if floor else None,
                    )
                )
    return out


def targets_big_payloads(result: Dict[str, Any]) -> List[Target]:
    """Big payloads and broadcast against the raw transport (issue 7, target 3)."""
    idx = collective_index(result)
    out: List[Target] = []
    for backend in ("torch_cpu", "mpi4py", "torch_horovod"):
        for ws in sorted({k[2] for k in idx if k[1] == backend and k[0] == "ours"}):
            for op in OPS:
                for payload in ("arr64m", "arr256m"):
                    ours = med(idx, ("ours", backend, ws, op, payload, "mmeval"))
                    raw = best_raw(idx, "ours", backend, ws, op, payload)
                    floor = floor_raw(idx, "ours", backend, ws, op, payload)
                    if ours is None or raw is None:
                        continue
                    out.append(
                        Target(
                            f"{payload} {op}_object ≤1.15x raw",
                            where(backend, ws),
                            f"{fmt_ms(ours)} / {fmt_ms(raw)} ms",
                            ours / raw,
                            1.15,
                            floor=ours / floor if floor else None,
                        )
                    )
    return out


def targets_small_payloads(result: Dict[str, Any]) -> List[Target]:
    """1 KB against the framework's own object collective (issue 7, target 5)."""
    idx = collective_index(result)
    out: List[Target] = []
    for backend in ("torch_cpu", "mpi4py", "torch_horovod"):
        for ws in sorted({k[2] for k in idx if k[1] == backend and k[0] == "ours"}):
            for op in OPS:
                ours = med(idx, ("ours", backend, ws, op, "dict1k", "mmeval"))
                theirs = med(idx, ("ours", backend, ws, op, "dict1k", "framework"))
                if ours is None or theirs is None:
                    continue
                label = idx[("ours", backend, ws, op, "dict1k", "framework")]["label"]
                out.append(
                    Target(
                        f"1 KB {op} no slower than {label}",
                        where(backend, ws),
                        f"{fmt_ms(ours)} / {fmt_ms(theirs)} ms",
                        ours / theirs,
                        1.0,
                    )
                )
    return out


def collective_tables(result: Dict[str, Any]) -> List[str]:
    """One table per backend: every payload, operation and world size."""
    idx = collective_index(result)
    lines: List[str] = []
    for backend in BACKENDS:
        keys = [k for k in idx if k[0] == "ours" and k[1] == backend]
        if not keys:
            continue
        has_pkl5 = any(k[5] == "pkl5" for k in keys)
        lines += ["", f"### {backend}", ""]
        header = (
            ["ws", "op", "payload", "bytes", "mmeval ms", "framework ms"]
            + (["pkl5 ms"] if has_pkl5 else [])
            + ["raw ms", "floor ms", "mmeval / raw", "mmeval / floor", "framework / raw", "mmeval / framework"]
        )
        rows = []
        for ws in sorted({k[2] for k in keys}):
            for op in OPS:
                for payload in PAYLOAD_ORDER:
                    mine = idx.get(("ours", backend, ws, op, payload, "mmeval"))
                    if mine is None:
                        continue
                    ours = med(idx, ("ours", backend, ws, op, payload, "mmeval"))
                    fw = med(idx, ("ours", backend, ws, op, payload, "framework"))
                    raw = best_raw(idx, "ours", backend, ws, op, payload)
                    row = [str(ws), op, payload, fmt_bytes(mine["bytes"]), fmt_ms(ours), fmt_ms(fw)]
                    if has_pkl5:
                        row.append(fmt_ms(med(idx, ("ours", backend, ws, op, payload, "pkl5"))))
                    floor = floor_raw(idx, "ours", backend, ws, op, payload)
                    row += [
                        fmt_ms(med(idx, ("ours", backend, ws, op, payload, "raw"))),
                        fmt_ms(floor),
                        fmt_ratio(ours, raw),
                        fmt_ratio(ours, floor),
                        fmt_ratio(fw, raw),
                        fmt_ratio(ours, fw),
                    ]
                    rows.append(row)
        lines += table(header, rows)
        labels = sorted({(k[3], k[5], idx[k]["label"]) for k in keys})
        lines += ["", "Methods: " + "; ".join(f"{op} {m} = `{label}`" for op, m, label in labels) + "."]
    return lines


def mmeval021_table(result: Dict[str, Any]) -> List[str]:
    """MMEval 0.2.1's object collectives (its own env, separate run) beside ours."""
    idx = collective_index(result)
    keys = sorted({k[1:5] for k in idx if k[0] == "mmeval021" and k[5] == "mmeval"})
    if not keys:
        return []
    rows = []
    for backend, ws, op, payload in keys:
        old = med(idx, ("mmeval021", backend, ws, op, payload, "mmeval"))
        old_raw = best_raw(idx, "mmeval021", backend, ws, op, payload)
        ours = med(idx, ("ours", backend, ws, op, payload, "mmeval"))
        ours_g = med(idx, ("ours", backend, ws, "gather", payload, "mmeval")) if op == "all_gather" else None
        raw = best_raw(idx, "ours", backend, ws, op, payload)
        rows.append(
            [
                backend,
                str(ws),
                op,
                payload,
                fmt_ms(old),
                fmt_ratio(old, old_raw),
                fmt_ms(ours),
                fmt_ratio(ours, raw),
                fmt_ratio(old, ours),
                fmt_ms(ours_g),
                fmt_ratio(old, ours_g),
            ]
        )
    return [
        "",
        *table(
            [
                "backend",
                "ws",
                "op",
                "payload",
                "0.2.1 ms",
                "0.2.1 / raw (its run)",
                "ours ms",
                "ours / raw",
                "speed-up",
                "ours gather ms",
                "speed-up (gather)",
            ],
            rows,
        ),
    ]


def section(result: Dict[str, Any]) -> List[str]:
    """The object collectives' section, with MMEval 0.2.1's runs when there are any."""
    lines = [
        "",
        "## Object collectives",
        "",
        "Payloads: `dict1k` a 1 KB dict; `arrNm` a dict holding an N MiB float32 array; `tuples100k` a list "
        "of 100,000 `(int label, float32[10] scores)` tuples (the shape of metric results). `bytes` = the "
        "payload's plain pickle, what the raw transports move. framework = torch.distributed's / mpi4py's / "
        "Horovod's own object collective.",
        *collective_tables(result),
    ]
    old = mmeval021_table(result)
    if old:
        lines += [
            "",
            "### MMEval 0.2.1 (its own venv, run right after ours)",
            "",
            "0.2.1 has no gather_object (its `compute()` all-gathers), so our gather is compared with its "
            "all_gather too.",
            *old,
        ]
    return lines
