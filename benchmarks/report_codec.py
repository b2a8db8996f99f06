"""The safe codec against pickle: its table and its section of the report."""

from __future__ import annotations

from typing import Any, Dict, List

from report_common import PAYLOAD_ORDER, fmt_ms, fmt_ratio, records, table


def codec_table(result: Dict[str, Any]) -> List[str]:
    """safe vs pickle codec in one process."""
    recs = records(result, "codec")
    by = {(r["payload"], r["method"]): r for r in recs}
    rows = []
    for payload in PAYLOAD_ORDER:
        p, s, plain = (
            by.get((payload, "pickle codec")),
            by.get((payload, "safe codec")),
            by.get((payload, "plain pickle")),
        )
        if p is None or s is None:
            continue
        tp, ts = p["encode_s"] + p["decode_s"], s["encode_s"] + s["decode_s"]
        tplain = plain["encode_s"] + plain["decode_s"] if plain else None
        rows.append(
            [
                payload,
                f"{fmt_ms(p['encode_s'])} + {fmt_ms(p['decode_s'])}",
                f"{fmt_ms(s['encode_s'])} + {fmt_ms(s['decode_s'])}",
                f"{fmt_ms(plain['encode_s'])} + {fmt_ms(plain['decode_s'])}" if plain else "-",
                fmt_ratio(ts, tp),
                fmt_ratio(ts, tplain),
            ]
        )
    return table(
        [
            "payload",
            "pickle codec ms (encode + decode)",
            "safe codec ms",
            "plain pickle.dumps/loads ms",
            "safe / pickle codec",
            "safe / plain pickle",
        ],
        rows,
    )


def section(result: Dict[str, Any]) -> List[str]:
    """The safe codec against pickle."""
    return ["", "## The safe codec vs pickle (one process, encode + decode of one frame)", "", *codec_table(result)]
