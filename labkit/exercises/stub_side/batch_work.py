"""model.py of 01-batch's check model: the person's model.py (copied beside this file as person.py)
runs inside it, and every response reports what that execute() did.

The person's execute() gets the requests it would get, except that each input's ``as_numpy()`` is a
numpy array that counts the additions and subtractions computed from it (operators, np.add, ``+=``;
an array made from it by np.concatenate, slicing or reshaping counts too). Every response gains an
output WORK, each row [requests in this execute(), additions, subtractions], so the check sees whether the
work grows with the number of requests (a loop over them) or is done once for the whole batch.
"""

import importlib.util
import os

import numpy as np
import triton_python_backend_utils as pb_utils

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("person_model", os.path.join(_here, "person.py"))
_person = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_person)

_counts = {"add": 0, "subtract": 0}


class Counted(np.ndarray):
    """An input array that counts the additions and subtractions computed from it; results are plain arrays."""

    __array_priority__ = 1.0  # so that np.concatenate, np.vstack and np.stack of them are Counted too

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc.__name__ in _counts:
            _counts[ufunc.__name__] += 1
        inputs = [x.view(np.ndarray) if isinstance(x, Counted) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, Counted) else x for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)


class _Input:
    def __init__(self, tensor):
        self._tensor = tensor

    def as_numpy(self):
        return self._tensor.as_numpy().view(Counted)

    def __getattr__(self, name):
        return getattr(self._tensor, name)


class _Request:
    def __init__(self, request):
        self._request = request

    def inputs(self):
        return [_Input(tensor) for tensor in self._request.inputs()]

    def __getattr__(self, name):
        return getattr(self._request, name)


def _rows(request):
    return request.inputs()[0].as_numpy().shape[0]


class TritonPythonModel:
    def initialize(self, args):
        self._model = _person.TritonPythonModel()
        if hasattr(self._model, "initialize"):
            self._model.initialize(args)

    def execute(self, requests):
        _counts.update(add=0, subtract=0)
        responses = self._model.execute([_Request(r) for r in requests])
        work = np.array([len(requests), _counts["add"], _counts["subtract"]], np.int64)
        return [
            pb_utils.InferenceResponse(
                # one row of WORK per row of the request, so it has the shape its config declares
                list(response.output_tensors()) + [pb_utils.Tensor("WORK", np.tile(work, (_rows(request), 1)))],
                error=response.error() if response.has_error() else None,
            )
            for request, response in zip(requests, responses)
        ]

    def finalize(self):
        if hasattr(self._model, "finalize"):
            self._model.finalize()
