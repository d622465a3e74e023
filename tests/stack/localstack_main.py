"""Starts LocalStack 4.13.1 (Python runtime, no Docker) with two work-arounds for this machine.

1. Python 3.11: `localstack/packages/api.py` annotates `install_lock: Lock | None`, which only
   evaluates on Python >= 3.13 (there `threading.Lock` is a class; on 3.11 it is a builtin
   function and the import fails with "unsupported operand type(s) for |:
   'builtin_function_or_method' and 'NoneType'"). Every Lambda call imports that module, so
   without this the Lambda service cannot start. `threading.Lock` becomes a class whose
   instances are the same `_thread` locks as before.
2. No Docker daemon: LocalStack's only community Lambda executor (docker) prepares each new
   function version by downloading its runtime-init binary from GitHub and pulling the runtime
   image, and CreateFunction ends in state Failed when that fails. Preparation only serves
   invocation, which the deploy rehearsal (tests/e2e/test_deploy_rehearsal.py) never does, so it
   is skipped: functions are created, stored and described for real, but cannot be invoked here
   (the handlers are run by `cargo lambda watch` instead).
"""

import _thread
import runpy
import threading


class Lock:
    """`threading.Lock()` as before, but usable in `Lock | None` annotations."""

    def __new__(cls):
        return _thread.allocate_lock()


threading.Lock = Lock  # type: ignore[misc]  (before any LocalStack import)

from localstack.services.lambda_.invocation import docker_runtime_executor  # noqa: E402

docker_runtime_executor.DockerRuntimeExecutor.prepare_version = classmethod(  # type: ignore[method-assign]
    lambda cls, function_version: None
)

runpy.run_module("localstack.runtime.main", run_name="__main__")
