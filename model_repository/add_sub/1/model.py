"""add_sub: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32, four values)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_name = args["model_name"]

    def execute(self, requests):
        responses = []
        # Each request is answered on its own; with batching on, each carries its own batch dimension.
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            outputs = [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

    def finalize(self):
        pb_utils.Logger.log_info(f"{self.model_name}: finalized")
