"""experiments.check_kernels' epoch family on the CPU (interpret mode): each float32 case is bounded
by twice xla's own float32 distance from float64 where that is above the tolerance, and a case
outside its bound gets one fresh draw."""

import numpy as np

from experiments import check_kernels as ck


def test_epoch_case_bounds_float32_by_xla_and_redraws_once(monkeypatch):
  monkeypatch.setattr(ck, "EPOCH_CASES", [((33, 40, 17, 3), 37, "momentum")])
  cases = list(ck.epoch_cases(np.random.default_rng(0), interpret=True))
  assert [precision for _, precision, _, _ in cases] == list(ck.TOLERANCE)
  name, _, err, bound = cases[0]
  assert "(xla " in name and bound >= ck.TOLERANCE["float32"] and err < bound
  assert all(bound == ck.TOLERANCE[p] and err < bound for _, p, err, bound in cases[1:])
  # A kernel that always leaves float64 (its losses a third off): a fresh draw, then a failure.
  real = ck.mlp_epoch.train_epoch

  def wrong_kernel(*args, **kwargs):
    params, slots, losses, correct = real(*args, **kwargs)
    return params, slots, losses * 1.5, correct
  monkeypatch.setattr(ck.mlp_epoch, "train_epoch", wrong_kernel)
  monkeypatch.setattr(ck, "TOLERANCE", {"float32": ck.TOLERANCE["float32"]})
  (name, _, err, bound), = ck.epoch_cases(np.random.default_rng(0), interpret=True)
  assert "2nd draw" in name and err > bound
