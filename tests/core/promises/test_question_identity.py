"""Promise: nothing is answered for another question (issue 32, item 1) -- what shapes the answer is in the question.

A callable counts by a stable identity (where it is defined, and its state), a file by its content; what has no
comparable identity (a lambda, a closure) is refused up front, naming the argument and what to pass. Real
processes over the hub test backend (TCP).
"""

from __future__ import annotations

import ast
import json
import os
import warnings
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from hub_backend import run_ranks

from mmeval import BLEU, ROUGE
from mmeval.core.errors import MetricArgumentError
from mmeval.core.wire.question import canonical_question

TIMEOUT = 20.0
PREDS = ["the cat sat on the mat today", "a dog ran in the park", "it is raining hard"]
REFS = [["the cat is on the mat today"], ["the dog ran in a park"], ["it rains hard"]]


class WordTokenizer:
    """A tokenizer object with state: what it splits on and whether it lowercases."""

    def __init__(self, sep: str = " ", lower: bool = False) -> None:
        self.sep, self.lower = sep, lower

    def __call__(self, text: str) -> Any:
        return (text.lower() if self.lower else text).split(self.sep)


def split_words(text: str) -> Any:
    return text.split()


def _outcome(fn: Any) -> Tuple[str, str]:
    try:
        return "ok", repr(fn())
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _bleu_worker(backend: Any) -> Tuple[str, str]:
    tok = WordTokenizer("a") if backend.rank == 1 else WordTokenizer(" ")  # same class, other state
    metric = BLEU(tokenizer_fn=tok, dist_backend=backend)
    mine = list(range(backend.rank, 3, backend.world_size))
    metric.add([PREDS[i] for i in mine], [REFS[i] for i in mine])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _outcome(lambda: metric.compute(size=3))


def test_tokenizer_objects_differing_in_state_are_a_mismatch_on_every_rank():
    out = run_ranks(_bleu_worker, 2, timeout=90, backend_kwargs={"timeout": TIMEOUT})
    for rank in range(2):
        status, (kind, text) = out[rank]
        assert status == "ok", text
        assert kind != "ok", (rank, "answered a mix of two tokenizers", text)
        assert "tokenizer_fn" in text, (rank, text)


@pytest.mark.parametrize(
    "make",
    [
        lambda: BLEU(tokenizer_fn=lambda s: s.split()),
        lambda: ROUGE(tokenizer=lambda s: s.split()),
        lambda: ROUGE(normalizer=lambda s: s.lower()),
    ],
    ids=["bleu-lambda", "rouge-lambda", "rouge-normalizer-lambda"],
)
def test_a_lambda_is_refused_up_front_naming_the_argument_and_what_to_pass(make):
    with pytest.raises(MetricArgumentError, match=r"(tokenizer_fn|tokenizer|normalizer)=.*module level"):
        make()


def test_a_closure_is_refused_and_module_level_callables_are_identified():
    sep = " "

    def closure(text: str) -> Any:
        return text.split(sep)

    with pytest.raises(MetricArgumentError, match="tokenizer_fn"):
        BLEU(tokenizer_fn=closure)
    a, b = BLEU(tokenizer_fn=split_words), BLEU(tokenizer_fn=split_words)
    assert canonical_question(a._question(3)) == canonical_question(b._question(3))
    one, other = BLEU(tokenizer_fn=WordTokenizer(lower=True)), BLEU(tokenizer_fn=WordTokenizer(lower=False))
    assert canonical_question(one._question(3)) != canonical_question(other._question(3))


def test_niqe_pristine_parameters_are_in_the_question():
    import suite  # noqa: F401 -- puts tests/ (the case tables) on sys.path
    from metric_cases_image import niqe_params

    from mmeval.metrics.niqe import NaturalImageQualityEvaluator as NIQE

    a, b, c = NIQE(pris_params=niqe_params(5)), NIQE(pris_params=niqe_params(5)), NIQE(pris_params=niqe_params(6))
    assert canonical_question(a._question(None)) == canonical_question(b._question(None))
    assert canonical_question(a._question(None)) != canonical_question(c._question(None))


# -- COCODetection: a file by its content, dataset_meta named -------------------------------------------------------


def _coco_worker(backend: Any, dirs: Dict[int, str], metas: Dict[int, Any]) -> Tuple[str, str]:
    from coco_reference import detections

    from mmeval.metrics.coco_detection import COCODetection

    os.chdir(dirs[backend.rank])  # the same relative path, another file on each rank
    preds, _ = detections(8, 3, seed=4)
    metric = COCODetection(
        ann_file="ann.json", dataset_meta=metas[backend.rank], print_results=False, dist_backend=backend
    )
    mine = list(range(backend.rank, 8, backend.world_size))
    metric.add_predictions([preds[i] for i in mine])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _outcome(lambda: metric.compute(size=8))


def _ann_dirs(tmp_path: Any, same: bool) -> Dict[int, str]:
    from coco_reference import coco_json, detections

    dirs = {}
    for rank in range(2):
        _, gts = detections(8, 3, seed=4 if same or rank == 0 else 9)
        d = tmp_path / f"rank{rank}"
        d.mkdir()
        (d / "ann.json").write_text(json.dumps(coco_json(gts, ("a", "b", "c"))))
        dirs[rank] = str(d)
    return dirs


def _coco_run(tmp_path: Any, same: bool, metas: Dict[int, Any]) -> Dict[int, Any]:
    out = run_ranks(_coco_worker, 2, _ann_dirs(tmp_path, same), metas, timeout=120, backend_kwargs={"timeout": TIMEOUT})
    assert all(status == "ok" for status, _ in out.values()), out
    return {rank: value for rank, (_, value) in out.items()}


META = {"classes": ("a", "b", "c")}


def test_the_same_ann_file_path_holding_other_content_is_a_mismatch_on_every_rank(tmp_path):
    for rank, (kind, text) in _coco_run(tmp_path, False, {0: META, 1: META}).items():
        assert kind != "ok" and "ann_file" in text, (rank, kind, text)


def test_other_dataset_meta_classes_are_named_not_blamed_on_versions(tmp_path):
    metas = {0: META, 1: {"classes": ("c", "b", "a")}}
    for rank, (kind, text) in _coco_run(tmp_path, True, metas).items():
        assert kind != "ok" and "classes" in text and "versions of mmeval" not in text, (rank, kind, text)


def test_identical_files_on_every_rank_answer_as_one_process(tmp_path):
    out = _coco_run(tmp_path, True, {0: META, 1: META})
    assert out[0][0] == "ok" and out[0] == out[1], out
    assert np.isfinite(ast.literal_eval(out[0][1])["bbox_mAP"])


# -- OIDMeanAP: the class-hierarchy files by their content --------------------------------------------------------

OID_NAMES = ["/m/animal", "/m/dog", "/m/cat", "/m/vehicle", "/m/car", "/m/toycar"]


def _oid_tree(toycar_parent: str) -> Dict[str, Any]:
    return {
        "LabelName": "/m/entity",
        "Subcategory": [
            {"LabelName": "/m/animal", "Subcategory": [{"LabelName": "/m/dog"}, {"LabelName": "/m/cat"}]},
            {"LabelName": "/m/vehicle", "Subcategory": [{"LabelName": "/m/car"}]},
            {"LabelName": toycar_parent, "Subcategory": [{"LabelName": "/m/toycar"}]},
        ],
    }


def _oid_dirs(tmp_path: Any, same: bool) -> Dict[int, str]:
    """Per rank a folder with ``tree.json`` and ``labels.csv``: rank 1's toy car is an animal's unless ``same``."""
    dirs = {}
    for rank in range(2):
        d = tmp_path / f"oid{rank}"
        d.mkdir()
        parent = "/m/vehicle" if same or rank == 0 else "/m/animal"
        (d / "tree.json").write_text(json.dumps(_oid_tree(parent)))
        (d / "labels.csv").write_text("".join(f"{n},{n[3:]}\n" for n in OID_NAMES))
        dirs[rank] = str(d)
    return dirs


def _oid_images(n: int = 10) -> Tuple[Any, Any]:
    """Images with toy cars (class 5) and cars (4), half found: the toy car's ancestors shape the AP."""
    rng = np.random.default_rng(7)
    preds, gts = [], []
    for i in range(n):
        boxes = rng.uniform(0, 100, (2, 2))
        boxes = np.concatenate([boxes, boxes + rng.uniform(20, 60, (2, 2))], axis=1)
        labels = np.array([5, 4 if i % 2 else 1])
        gts.append({"instances": [{"bbox": b.tolist(), "bbox_label": int(c)} for b, c in zip(boxes, labels)]})
        found = boxes[: 1 + i % 2] + rng.normal(0, 2, (1 + i % 2, 4))
        preds.append({"bboxes": found, "scores": rng.uniform(0.3, 1.0, found.shape[0]), "labels": labels[: 1 + i % 2]})
    return preds, gts


def _oid_worker(backend: Any, dirs: Dict[int, str], by_files: bool) -> Tuple[str, str]:
    from mmeval.metrics.oid_map import OIDMeanAP, get_relation_matrix

    os.chdir(dirs[backend.rank])  # the same relative paths, other content on rank 1
    if by_files:
        metric = OIDMeanAP(num_classes=6, hierarchy_file="tree.json", label_file="labels.csv", dist_backend=backend)
    else:
        matrix = get_relation_matrix("tree.json", "labels.csv")
        metric = OIDMeanAP(num_classes=6, class_relation_matrix=matrix, dist_backend=backend)
    preds, gts = _oid_images()
    mine = list(range(backend.rank, len(preds), backend.world_size))
    metric.add([preds[i] for i in mine], [gts[i] for i in mine])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _outcome(lambda: metric.compute(size=len(preds)))


def _oid_run(tmp_path: Any, same: bool, by_files: bool) -> Dict[int, Tuple[str, str]]:
    out = run_ranks(
        _oid_worker, 2, _oid_dirs(tmp_path, same), by_files, timeout=120, backend_kwargs={"timeout": TIMEOUT}
    )
    assert all(status == "ok" for status, _ in out.values()), out
    return {rank: value for rank, (_, value) in out.items()}


def test_oid_hierarchy_files_with_other_content_under_one_path_are_a_mismatch_on_every_rank(tmp_path):
    for rank, (kind, text) in _oid_run(tmp_path, False, by_files=True).items():
        assert kind == "CollectiveMismatchError" and "hierarchy_file" in text, (rank, kind, text)


def test_oid_matrices_from_other_hierarchies_are_a_mismatch_naming_the_matrix(tmp_path):
    for rank, (kind, text) in _oid_run(tmp_path, False, by_files=False).items():
        assert kind == "CollectiveMismatchError" and "class_relation_matrix" in text, (rank, kind, text)


def test_oid_identical_hierarchy_files_answer_as_one_process(tmp_path):
    from mmeval.metrics.oid_map import OIDMeanAP, get_relation_matrix

    dirs = _oid_dirs(tmp_path, True)
    out = run_ranks(_oid_worker, 2, dirs, True, timeout=120, backend_kwargs={"timeout": TIMEOUT})
    assert all(status == "ok" for status, _ in out.values()), out
    matrix = get_relation_matrix(os.path.join(dirs[0], "tree.json"), os.path.join(dirs[0], "labels.csv"))
    single = OIDMeanAP(num_classes=6, class_relation_matrix=matrix)
    preds, gts = _oid_images()
    single.add(preds, gts)
    want = repr(single.compute())
    assert [out[r][1] for r in range(2)] == [("ok", want)] * 2, out
