"""COCODetection's labels as a pycocotools user has them: label ``i`` is ``dataset_meta['classes'][i]``, by name.

An ``ann_file`` lists its categories in any order, with any ids; a label maps
to the id of the category whose ``name`` is its class name -- never to the
file's i-th category. A class name the file does not have is refused, naming
it and the closest names the file has (``'Person'`` for ``'person'``), instead
of being dropped with every later label shifted.
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, List, Sequence

from ..core.errors import MetricArgumentError

__all__ = ["category_ids_by_name"]


def category_ids_by_name(categories: Sequence[Dict[str, Any]], classes: Sequence[str], ann_file: Any) -> List[int]:
    """The category id of each class name of ``classes`` (label ``i`` -> ``ids[i]``), from the file's categories.

    Raises :class:`~mmeval.core.errors.MetricArgumentError` naming a class the
    file does not list, or a name the file lists twice under different ids.
    """
    by_name: Dict[str, int] = {}
    for cat in categories:
        name, cid = cat.get("name"), cat.get("id")
        if name in by_name and by_name[name] != cid:
            raise MetricArgumentError(
                f"COCODetection: ann_file={ann_file!r} lists the category name {name!r} twice, with ids "
                f"{by_name[name]} and {cid}: a label cannot map to both; fix the file's 'categories'"
            )
        if isinstance(cid, bool) or not isinstance(cid, int):
            raise MetricArgumentError(
                f"COCODetection: ann_file={ann_file!r} has the category {cat!r} whose 'id' is not an int"
            )
        by_name[str(name)] = cid
    ids: List[int] = []
    for label, name in enumerate(classes):
        if name not in by_name:
            close = difflib.get_close_matches(str(name), list(by_name), n=3, cutoff=0.5)
            hint = f"; did you mean {close}?" if close else f"; it has {sorted(by_name)[:20]}"
            raise MetricArgumentError(
                f"COCODetection: dataset_meta['classes'][{label}] = {name!r} is not a category name of "
                f"ann_file={ann_file!r}{hint} (labels map to the file's categories by name)"
            )
        ids.append(by_name[name])
    return ids
