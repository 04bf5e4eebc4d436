"""The benchmark's PyTorch peer: its torch.compile mode trains the same steps as its eager mode.
Needs torch (the torch extra), so CI without it skips these; the device machine has it."""

import dataclasses

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch peer needs torch (pip install -e '.[torch]')")

from benchmarks import torch_peer  # noqa: E402
from jaxshallow.run import config, runner, trainers  # noqa: E402


def _epoch_losses(cfg, mode):
  ds = runner.load_data(cfg)
  params = jax.tree.map(np.asarray, trainers.init_params(cfg, ds))
  trainer = torch_peer.TorchTrainer(cfg, ds, params, mode=mode)
  trainer.compile()  # Compiles on copies of the weights, then puts them back.
  return [trainer.run_epoch(e) for e in range(cfg.epochs)]


@pytest.mark.parametrize("model", ["mlp", "logreg", "cnn"])
def test_compile_mode_matches_eager(real_data_dir, model):
  over = dict(hidden=(32,)) if model == "mlp" else {}
  cfg = config.resolve(dataclasses.replace(
      config.Config(model=model), data_dir=str(real_data_dir),
      train_limit=320 if model == "cnn" else 640, test_limit=100, epochs=2, **over))
  eager, compiled = _epoch_losses(cfg, "eager"), _epoch_losses(cfg, "compile")
  np.testing.assert_allclose(compiled, eager, rtol=1e-5)
  assert compiled[1] < compiled[0]  # it trains


def test_unknown_mode_is_one_line_error(real_data_dir):
  cfg = config.resolve(dataclasses.replace(config.Config(model="logreg"),
                                           data_dir=str(real_data_dir), train_limit=64,
                                           test_limit=10, epochs=1))
  ds = runner.load_data(cfg)
  params = jax.tree.map(np.asarray, trainers.init_params(cfg, ds))
  with pytest.raises(ValueError, match="unknown torch peer mode 'jit'; the modes are eager"):
    torch_peer.TorchTrainer(cfg, ds, params, mode="jit")
