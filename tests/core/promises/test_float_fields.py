"""Promise: bad input gets a clear error naming the thing (issue 32, item 3) -- for every metric of the case table.

A NaN or an infinity in each float field of each metric's ``add()`` arguments is refused at ``add()``, by an
error naming the argument, unless the metric declares that NaN has a meaning there
(``float_inputs = {arg: FloatInput(finite=False, nan_where=...)}``), which it then documents and tests.
Cost: one process, about 3 add() calls per float field of each case (seconds in all).
"""

from __future__ import annotations

import math
import warnings

import pytest
import suite


@pytest.mark.parametrize("case_name", suite.metric_cases.CASE_NAMES)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_each_float_field_refuses_a_non_finite_value_naming_the_argument(case_name, bad):
    case = suite.payload()[case_name]
    names = suite.arg_names(case)
    batch = suite.first_batch(case)
    declared = getattr(suite.metric_cases.metric_class(case["metric"]), "float_inputs", {}) or {}
    for j, path in suite.field_patterns(batch):
        arg = names[j] if j < len(names) else f"argument {j}"
        meaning = suite.nan_meaning(declared.get(arg), path)
        if meaning:  # NaN means something here: the metric says where, and tests it (e.g. an invalid keypoint)
            assert meaning != "?", f"{case_name}: {arg} accepts NaN but does not say where it means something"
            continue
        metric = suite.make(case)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                metric.add(*suite.with_value(batch, j, path, bad))
            except Exception as exc:  # refused: it must name the argument
                assert arg in str(exc), (
                    f"{case_name}: {arg}{suite.where(path)} = {bad} refused without naming {arg}: {exc}"
                )
                continue
        pytest.fail(f"{case_name}: add() accepted {bad} in {arg}{suite.where(path)} without a word")
