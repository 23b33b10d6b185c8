"""Lessons on the rest of the backend API, one small module each, shared by notebooks 07 and 12, the
tests and the `api_tour` demo section:

- volume_batching: a custom batching strategy library that caps each batch by bytes
- bls: a Python model calling other models (Business Logic Scripting), sync and async
- decoupled: a Python model sending several responses per request over gRPC streaming
- response_parameters: a C++ backend adding string, integer and boolean parameters to responses
- artifacts: a C++ backend reading a file from its model's folder at load
- auto_complete: a C++ backend and a Python model filling in what their configs leave out
- stateful: sequences of requests, with state kept by a Python model or by Triton (implicit state)
- instances: two instances of a C++ model, a state each, the model's state shared under a mutex
  (notebook 14; Triton's C API alone, like the three below)
- decoupled_cpp: a decoupled C++ backend answering through a response factory
- cancellation: C++ backends that see a client's cancellation (a plain request, a stream) and stop

Notebook 12 (BLS in depth, request parameters, the rest of the backend API):

- model_loading: a BLS model that loads, reloads and unloads a model given as a config and files
- bls_decoupled: BLS over a decoupled model (every response streamed on), and async_exec refused there
- bls_stateful: BLS requests that carry a sequence id and its start and end flags into a stateful model
- rescheduling: one request executed once per step (iterative sequences), and a request Triton drops
- request_parameters: a request's parameters read in Python, in C++ (C API alone) and passed on by BLS
- python_logging: pb_utils.Logger at every level, found in the server's log
- backend_attributes: preferred instance groups, parallel instance loading, execution policy and memory
  usage reports of a C++ backend (C API alone)

Notebook 17 (real models):

- real_models (with real_models_data): PP-OCRv4 and silero-vad from examples/real_models served with their own
  environments, the drawn text and spoken audio they are fed, their answers scored, Triton against onnxruntime alone

Notebook 11 (the Python backend in production):

- production: which Python each runtime's stubs embed, and a server's shared-memory regions (readers, no
  ``setup``/``run``)

Every other lesson module has the same two calls: ``setup(server)`` writes its configs and sources and
loads its models, and ``run(server) -> Outcome`` exercises it once (setting up what it needs) and
says whether its claim held. Each also keeps its ``SOURCE`` (and configs) as module constants, so a
notebook can print the code it runs.
"""
