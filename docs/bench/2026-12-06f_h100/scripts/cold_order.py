"""experiments.mnist with the trainer's compile order as ORDER says, for cold runs on the GPU:
``evaluation_first`` (the trainer as it is, since c4225f5) or ``training_first`` (b24bac3's
order: the evaluation traced once the training's first program is lowered).

  ORDER=training_first python docs/bench/next/cold_order.py --model=mlp --impl=pallas
"""
import os
import runpy
import sys
import threading
from concurrent import futures

from jaxshallow import compile_cache
from jaxshallow.run import jax_trainer

if os.environ.get("ORDER", "evaluation_first") == "training_first":
  lower_and_compile = compile_cache.lower_and_compile

  def compile(self):  # JaxTrainer.compile in b24bac3's order
    import time
    t0 = time.perf_counter()
    lowered = threading.Event()
    main = threading.current_thread()

    def first_in_main(jitted, *args, lowered=None, **static):
      if threading.current_thread() is main and lowered is None:
        lowered = training_lowered
      return lower_and_compile(jitted, *args, lowered=lowered, **static)
    training_lowered = lowered
    compile_cache.lower_and_compile = first_in_main

    def evaluation():
      lowered.wait()
      self.compile_evaluation()
    try:
      with futures.ThreadPoolExecutor(1) as pool:
        done = pool.submit(evaluation)
        try:
          self._compile_training()
        finally:
          lowered.set()
      done.result()
    finally:
      compile_cache.lower_and_compile = lower_and_compile
    return time.perf_counter() - t0
  jax_trainer.JaxTrainer.compile = compile

sys.argv = ["mnist"] + sys.argv[1:]
runpy.run_module("experiments.mnist", run_name="__main__")
