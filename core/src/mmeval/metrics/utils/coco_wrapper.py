"""MMEval 0.2.1's ``mmeval.metrics.utils.coco_wrapper`` path: pycocotools' ``COCO``, ``COCOeval`` and ``mask_util``.

Importing this module imports pycocotools (extra ``coco``); without it the import raises
:class:`~mmeval.core.errors.MissingExtraError` (an ``ImportError``), so MMEval-style
``try_import('mmeval.metrics.utils.coco_wrapper')`` gives ``None``. :class:`~mmeval.metrics.COCODetection`
itself does not use this module.
"""

from typing import Any, Dict, List, Optional, Union

from ..extras import import_extra

mask_util: Any = import_extra("pycocotools.mask", "mmeval.metrics.utils.coco_wrapper")
_coco: Any = import_extra("pycocotools.coco", "mmeval.metrics.utils.coco_wrapper")
COCOeval: Any = import_extra("pycocotools.cocoeval", "mmeval.metrics.utils.coco_wrapper").COCOeval

__all__ = ["COCO", "COCOeval", "mask_util"]


class COCO(_coco.COCO):  # type: ignore[misc]
    """pycocotools' ``COCO`` with MMEval's snake-case names (``get_ann_ids``, ``get_cat_ids``, ...)."""

    def __init__(self, annotation_file: Optional[str] = None) -> None:
        super().__init__(annotation_file=annotation_file)
        self.img_ann_map = self.imgToAnns
        self.cat_img_map = self.catToImgs

    def get_ann_ids(
        self,
        img_ids: Union[List[Any], int] = [],
        cat_ids: Union[List[Any], int] = [],
        area_rng: Union[List[Any], int] = [],
        iscrowd: Optional[bool] = None,
    ) -> List[int]:
        return self.getAnnIds(img_ids, cat_ids, area_rng, iscrowd)  # type: ignore[no-any-return]

    def get_cat_ids(
        self,
        cat_names: Union[List[Any], int] = [],
        sup_names: Union[List[Any], int] = [],
        cat_ids: Union[List[Any], int] = [],
    ) -> List[int]:
        return self.getCatIds(cat_names, sup_names, cat_ids)  # type: ignore[no-any-return]

    def get_img_ids(self, img_ids: Union[List[Any], int] = [], cat_ids: Union[List[Any], int] = []) -> List[int]:
        return self.getImgIds(img_ids, cat_ids)  # type: ignore[no-any-return]

    def load_anns(self, ids: Union[List[Any], int] = []) -> List[Dict[str, Any]]:
        return self.loadAnns(ids)  # type: ignore[no-any-return]

    def load_cats(self, ids: Union[List[Any], int] = []) -> List[Dict[str, Any]]:
        return self.loadCats(ids)  # type: ignore[no-any-return]

    def load_imgs(self, ids: Union[List[Any], int] = []) -> List[Dict[str, Any]]:
        return self.loadImgs(ids)  # type: ignore[no-any-return]
