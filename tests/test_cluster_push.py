"""cluster_push's PTX on the CPU: the probe of cluster_mlp_mgpu's two exchanges
(``probes.cluster_exchange --mlp``) lowers for a Hopper GPU in both forms, pulled (a cluster
barrier and peer reads) and pushed (bulk copies completing on the receiver's mbarrier, issued by
one thread or spread over four warps). The pushed forms run on the GPU only (Mosaic GPU's interpreter runs no PTX); the device checks its
sums in that script and cluster_mlp_mgpu's in ``experiments.check_kernels --only=cluster_mlp``."""

import pytest


@pytest.mark.parametrize("form", ["pulled", "pushed", "spread"])
def test_mlp_exchanges_lower(form):
  from probes import cluster_exchange
  text = cluster_exchange.mlp_exchanges(1000, form).trace().lower(
      lowering_platforms=("cuda",)).as_text()
  assert "mosaic_gpu" in text.lower()
  if form != "pulled":  # the pushes' PTX is in the lowered module
    assert "mapa.shared::cluster" in text
    assert ("setp.lt.and.u32" in text) == (form == "spread")
