"""COCO detection's family: its targets, its table and its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from report_common import Target, fmt_bytes, records, table

DETECTION_EXACT = 1e-12


def _detection_index(result: Dict[str, Any]) -> Dict[Tuple[str, str, str, int], Dict[str, Any]]:
    """Detection records by (case, impl, backend, ws); the single-process ones have backend 'single process'."""
    return {(r["case"], r["impl"], r["backend"], r["ws"]): r for r in records(result, "detection")}


def _det_total(rec: Optional[Dict[str, Any]]) -> Optional[float]:
    """The evaluation's seconds: evaluate + accumulate for the references, add() + compute() for the metrics."""
    if rec is None or rec.get("error") or not rec.get("times_s"):
        return None
    if "eval_s" in rec:
        return float(rec["eval_s"])
    return float(rec["add_s"]) + float(rec["compute_s"])


def _det_diff(rec: Dict[str, Any], reference: Optional[Dict[str, Any]]) -> Optional[float]:
    """max |stat - pycocotools' stat| over the 12 COCO stats (None when either is missing)."""
    if reference is None or not rec.get("stats") or not reference.get("stats"):
        return None
    return max(abs(a - b) for a, b in zip(rec["stats"], reference["stats"]))


def _det_summary_bytes(rec: Dict[str, Any]) -> Optional[float]:
    """The compact summaries of the world: every rank's packed summaries (older records: the bytes per
    detection the sending ranks sent, times every detection -- when they all went to rank 0)."""
    if rec.get("summary_bytes_per_rank"):
        return float(sum(rec["summary_bytes_per_rank"]))
    sent, dets = rec.get("sent_bytes_per_rank"), rec.get("dets_per_rank")
    if not sent or not dets or rec["ws"] < 2:
        return None
    senders = [(s, d) for s, d in zip(sent[1:], dets[1:]) if d]
    if not senders:
        return None
    return sum(s for s, _ in senders) / sum(d for _, d in senders) * float(rec["world_detections"])


def detection_targets(result: Dict[str, Any]) -> List[Target]:
    """The COCO detection targets, each case of ``benchmarks/detection.py`` measured side by side."""
    idx = _detection_index(result)
    out: List[Target] = []
    for case in sorted(
        {k[0] for k in idx}, key=lambda c: ("bbox", "lvis", "segm").index(c) if c in ("bbox", "lvis", "segm") else 9
    ):
        pyc = idx.get((case, "pycocotools", "single process", 1))
        fce = idx.get((case, "faster-coco-eval", "single process", 1))
        ours1 = idx.get((case, "ours", "single process", 1))
        t_pyc, t_fce, t_ours1 = _det_total(pyc), _det_total(fce), _det_total(ours1)
        if t_ours1 is not None and t_fce is not None:
            out.append(
                Target(
                    f"COCODetection {case}: add()+compute() ≤1.1x faster-coco-eval's evaluate+accumulate",
                    "single process",
                    f"{t_ours1:.2f} / {t_fce:.2f} s",
                    t_ours1 / t_fce,
                    1.1,
                )
            )
        if t_ours1 is not None and t_pyc is not None:
            out.append(
                Target(
                    f"COCODetection {case}: ≥5x faster than pycocotools' evaluate+accumulate",
                    "single process",
                    f"{t_pyc:.2f} / {t_ours1:.2f} s",
                    t_pyc / t_ours1,
                    5,
                    True,
                )
            )
        for (c, impl, backend, ws), rec in sorted(idx.items(), key=lambda kv: (kv[0][2], kv[0][3])):
            if c != case or impl != "ours" or ws < 2 or rec.get("error"):
                continue
            where = f"{backend} ws={ws}"
            total = _det_total(rec)
            beside = rec.get("single_beside_s")  # the same job, interleaved: the same load
            alone = float(beside) if beside else t_ours1
            if ws == 2 and total is not None and alone is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: add()+compute() at ws=2 ≤0.6x single process",
                        where,
                        f"{total:.2f} / {alone:.2f} s"
                        + (" (single process interleaved in the same job)" if beside else ""),
                        total / alone,
                        0.6,
                    )
                )
            tm = idx.get((case, "torchmetrics", backend, ws))
            t_tm = _det_total(tm)
            if t_tm is not None and total is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: ≥1.8x faster than torchmetrics (faster_coco_eval) at ws={ws}",
                        where,
                        f"{t_tm:.2f} / {total:.2f} s",
                        t_tm / total,
                        1.8,
                        True,
                    )
                )
            if rec.get("bytes_per_det") is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: bytes sent per rank per detection ≤ 16",
                        where,
                        f"{max(rec['sent_bytes_per_rank']):,.0f} B / {max(rec['dets_per_rank']):,.0f} dets",
                        round(float(rec["bytes_per_det"]), 2),
                        16,
                        unit="B/det",
                    )
                )
            summaries = _det_summary_bytes(rec)
            if summaries:
                peak = rec["peak_extra_bytes_per_rank"][0]
                traced = rec.get("traced_peak_bytes_per_rank")
                live = f" (live peak, tracemalloc: {fmt_bytes(traced[0])})" if traced else ""
                out.append(
                    Target(
                        f"COCODetection {case}: rank 0's peak extra memory in compute() ≤2x the world's "
                        "compact summaries",
                        where,
                        f"{fmt_bytes(peak)} / {fmt_bytes(summaries)}{live}",
                        peak / summaries,
                        2,
                    )
                )
        for (c, impl, backend, ws), rec in sorted(idx.items(), key=lambda kv: (kv[0][2], kv[0][3])):
            diff = _det_diff(rec, pyc)
            if c == case and impl == "ours" and diff is not None:
                out.append(
                    Target(
                        f"COCODetection {case}: every stat equal to pycocotools (max |diff|)",
                        f"{backend} ws={ws}",
                        "12 stats",
                        diff,
                        DETECTION_EXACT,
                        unit="abs",
                    )
                )
    return out


def detection_table(result: Dict[str, Any]) -> List[str]:
    """Every detection record: time, bytes, memory, and the distance of its stats from pycocotools'."""
    idx = _detection_index(result)
    rows = []
    names = {"ours": "this project", "mmeval021": "MMEval 0.2.1", "torchmetrics": "torchmetrics (faster_coco_eval)"}
    impls = ("pycocotools", "faster-coco-eval", "ours", "torchmetrics", "mmeval021")
    for (case, impl, backend, ws), rec in sorted(
        idx.items(),
        key=lambda kv: (
            ("bbox", "lvis", "segm", kv[0][0]).index(kv[0][0]),
            kv[0][3],
            kv[0][2] != "torch_cpu",
            kv[0][2],
            impls.index(kv[0][1]) if kv[0][1] in impls else len(impls),
        ),
    ):
        data = rec.get("data") or {}
        size = (
            f"{data['images']:,} img, {data['detections']:,} dets, {data['ground_truths']:,} gts"
            if data
            else f"{rec.get('images', 0):,} img, {rec.get('world_detections', 0):,} dets"
        )
        if rec.get("error"):
            rows.append(
                [
                    case,
                    names.get(impl, impl),
                    f"{backend} ws={ws}",
                    size,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "error: " + str(rec["error"])[:120],
                ]
            )
            continue
        first = f"{rec['build_s']:.2f} (build)" if "build_s" in rec else f"{rec['add_s']:.2f}"
        second = f"{rec['eval_s']:.2f} (evaluate+accumulate)" if "eval_s" in rec else f"{rec['compute_s']:.2f}"
        total = _det_total(rec)
        if rec.get("bytes_per_det") is not None:
            moved = f"{rec['bytes_per_det']:.1f} sent"
        elif rec.get("gathered_bytes_per_det") is not None:
            moved = f"{rec['gathered_bytes_per_det']:.0f} gathered (its states)"
        else:
            moved = "-"
        peaks = rec.get("peak_extra_bytes_per_rank") or []
        traced = rec.get("traced_peak_bytes_per_rank") or []
        peak_text = "-" if not peaks else fmt_bytes(peaks[0]) + (f" (live {fmt_bytes(traced[0])})" if traced else "")
        diff = _det_diff(rec, idx.get((case, "pycocotools", "single process", 1)))
        if rec.get("single_beside_s"):
            rec.setdefault("notes", []).append(
                f"single process interleaved in this job: {rec['single_beside_s']:.2f} s"
            )
        rows.append(
            [
                case,
                names.get(impl, impl),
                f"{backend} ws={ws}" if ws > 1 else backend,
                size,
                first,
                second,
                "-" if total is None else f"{total:.2f}",
                moved,
                peak_text,
                "-" if diff is None or impl == "pycocotools" else f"{diff:.1e}",
                "; ".join(rec.get("notes", [])),
            ]
        )
    return table(
        [
            "case",
            "impl",
            "where",
            "data",
            "add / build s",
            "compute / eval s",
            "total s",
            "B per detection",
            "rank 0 peak extra (VmHWM; live: tracemalloc)",
            "max abs diff vs pycocotools (12 stats)",
            "notes",
        ],
        rows,
    )


def section(result: Dict[str, Any]) -> List[str]:
    """The COCO detection section (nothing when the part did not run)."""
    det = detection_table(result)
    if len(det) <= 2:
        return []
    return [
        "",
        "## COCO detection",
        "",
        "`benchmarks/detection.py` on synthetic COCO-like data (`benchmarks/coco_data.py`, the same images "
        "for every side). total = evaluate + accumulate for pycocotools / faster-coco-eval (building their "
        "COCO objects apart), add() + compute() for the metrics (each the slowest rank's, median over "
        "iterations). B per detection: what our compute() sends per rank (comm-stats hook), or for the "
        "others the bytes of the states every rank hands to the all-gather. peak extra: VmHWM during "
        "compute() minus VmRSS before it, rank 0 (the heap trimmed first, so that memory freed by an "
        "earlier evaluation in the process is not reused unseen).",
        "",
        *det,
    ]
