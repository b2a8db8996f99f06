# An mmdet-style evaluation config: MMEngine builds the Evaluator from val_evaluator, each metric an
# mmeval metric through the adapter that custom_imports registers (mmeval.integrations.mmengine).
custom_imports = dict(imports=["mmeval.integrations.mmengine"], allow_failed_imports=False)

val_evaluator = [
    dict(type="MMEvalMetric", metric=dict(type="COCODetection", metric="bbox", print_results=False), prefix="coco"),
    dict(type="MMEvalMetric", metric=dict(type="Accuracy", topk=(1, 3), thrs=None), prefix="acc"),
]
