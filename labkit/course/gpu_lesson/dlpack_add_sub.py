# add_sub on the GPU with cupy: Triton's tensors reach cupy through DLPack, without a copy when they
# are in GPU memory (config: KIND_GPU and FORCE_CPU_ONLY_INPUT_TENSORS "no"). A plain HTTP client's
# inputs arrive in CPU memory; they are copied to the GPU once, here, with cp.asarray.
import cupy as cp
import triton_python_backend_utils as pb_utils


def _on_gpu(tensor):
    if tensor.is_cpu():
        return cp.asarray(tensor.as_numpy())
    return cp.from_dlpack(tensor.to_dlpack())


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = _on_gpu(pb_utils.get_input_tensor_by_name(request, "INPUT0"))
            b = _on_gpu(pb_utils.get_input_tensor_by_name(request, "INPUT1"))
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor.from_dlpack("OUTPUT0", (a + b).toDlpack()),
                        pb_utils.Tensor.from_dlpack("OUTPUT1", (a - b).toDlpack()),
                    ]
                )
            )
        return responses
