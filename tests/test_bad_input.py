"""Every script refuses a bad command line in one clear line: non-zero exit, no traceback, at
most one line on stderr besides absl's own flag-parsing lines, no output file left behind.

One row a bad command line: (script, arguments, a piece of the expected message or None).
``{out}`` in an argument is a path in a fresh temporary folder; the test checks that nothing was
written there.
"""

import os
import re
import subprocess
import sys

import pytest

import forkrun
from conftest import ROOT

M, R, S, P = ("experiments.mnist", "experiments.regression", "experiments.sweep",
              "experiments.parity")
C, B, PB = "experiments.check_kernels", "benchmarks.bench", "benchmarks.population_bench"
K, F = "benchmarks.kernel_times", "benchmarks.floors"
CASES = [
    # experiments.mnist: unknown names, zero, negative, non-numeric, out of range
    (M, ["--impl=cuda"], "unknown impl 'cuda'"),
    (M, ["--model=resnet"], "unknown model 'resnet'"),
    (M, ["--dataset=cifar"], "unknown dataset 'cifar'"),
    (M, ["--epochs=0"], "epochs must be at least 1"),
    (M, ["--epochs=-3"], "epochs must be at least 1"),
    (M, ["--epochs=abc"], None),
    (M, ["--batch_size=0"], "batch_size must be at least 1"),
    (M, ["--lr=-1"], "lr must be a positive number"),
    (M, ["--lr=0"], "lr must be a positive number"),
    (M, ["--lr=nan"], "lr must be a positive number"),
    (M, ["--lr=1e39"], "lr must be at most float32's largest number"),
    (M, ["--lr=abc"], None),
    (M, ["--optimizer=rmsprop"], "unknown optimizer 'rmsprop'"),
    (M, ["--momentum=1.5"], "momentum must be in [0, 1)"),
    (M, ["--hidden=0"], "hidden must list positive widths"),
    (M, ["--hidden=abc"], "hidden must be comma-separated"),
    (M, ["--hidden=256,,10"], "hidden must be comma-separated"),
    (M, ["--precision=fp8"], "unknown precision 'fp8'"),
    (M, ["--numpy_dtype=float16"], "numpy_dtype must be float32 or float64"),
    (M, ["--dispatch=fast"], "dispatch must be scan or loop"),
    (M, ["--unroll=0"], "unroll must be at least 1"),
    (M, ["--sync_every=0"], "sync_every must be at least 1"),
    (M, ["--epochs_per_call=-1"], "epochs_per_call must be at least 0"),
    (M, ["--dispatch=loop", "--epochs_per_call=2"], "--epochs_per_call needs --dispatch=scan"),
    (M, ["--impl=numpy", "--epochs_per_call=2"], "--epochs_per_call applies to xla, pallas"),
    (M, ["--devices=-1"], "devices must be at least 0"),
    (M, ["--train_limit=0"], "train_limit must be at least 1"),
    (M, ["--test_limit=-5"], "test_limit must be at least 1"),
    (M, ["--impl=pallas", "--fusion=magic"], "fusion must be epoch, step, ops or xla"),
    (M, ["--impl=pallas", "--blocks=16,16"], "blocks must be 'auto' or three integers"),
    (M, ["--impl=pallas", "--blocks=24,16,16"], "powers of two"),
    (M, ["--impl=triton"], "--impl=triton needs"),
    (M, ["--nosuchflag"], None),
    (M, ["--compilation_cache=/dev/null"], "--compilation_cache /dev/null: cannot write there"),
    (M, ["--seed=-1"], "seed must be an integer from 0 to 4294967295, got -1"),
    (M, ["--seed=99999999999999999999"], "seed must be an integer from 0 to 4294967295"),
    (M, ["--out={out}/results/"], "is a directory; give a file name"),
    (M, ["--out=pyproject.toml/r.json"], "pyproject.toml is a file, not a folder"),
    (M, ["--data_dir="], "data_dir must name a folder"),
    ("benchmarks.end_to_end", ["--workloads=resnet"], "unknown --workloads resnet"),
    ("benchmarks.end_to_end", ["--impls=cuda"], "unknown --impls cuda"),
    ("benchmarks.end_to_end", ["--workloads="], "--workloads names none"),
    ("benchmarks.end_to_end", ["--extra=--out=/tmp/x.json"], "end_to_end sets --out, --impl"),
    ("benchmarks.end_to_end", ["--extra=--impl=numpy"], "--extra --impl=numpy: end_to_end sets"),
    ("benchmarks.end_to_end", ["--epochs=0"], "--epochs must be at least 1"),
    ("benchmarks.end_to_end", ["--warm_runs=0"], "--warm_runs must be at least 1"),
    ("benchmarks.end_to_end", ["--rounds=0"], "--rounds must be at least 1"),
    # contradicting pairs, and settings that do not apply
    (M, ["--model=cnn", "--hidden=512"], "--hidden applies to the mlp and the regression net"),
    (M, ["--model=logreg", "--hidden=64"], "--hidden applies to the mlp and the regression net"),
    (M, ["--optimizer=sgd", "--momentum=0.5"], "--momentum applies to --optimizer=momentum"),
    (M, ["--momentum=0.5"], "--momentum applies to --optimizer=momentum"),
    (M, ["--impl=xla", "--numpy_dtype=float64"], "--numpy_dtype applies to --impl=numpy"),
    (M, ["--impl=numpy", "--precision=tf32"], "--precision applies to xla, pallas and triton"),
    (M, ["--impl=xla", "--fusion=epoch"], "--fusion applies to --impl=pallas only"),
    (M, ["--blocks=16,16,16"], "--blocks applies to --impl=pallas only"),
    (M, ["--placement=streamed"], "need --dispatch=loop"),
    (M, ["--sync=step"], "need --dispatch=loop"),
    (M, ["--dispatch=loop", "--unroll=4"], "--unroll applies to --dispatch=scan"),
    (M, ["--impl=numpy", "--data_parallel"], "--data_parallel needs --impl=xla or pallas"),
    (M, ["--impl=numpy", "--dispatch=loop"], "the techniques apply to xla and pallas only"),
    # stray arguments and outputs
    (M, ["extra"], "unexpected arguments extra"),
    (M, ["--data_dir=/nonexistent/jaxshallow"], "/nonexistent/jaxshallow"),
    (M, ["--out=/proc/jaxshallow/x.json"], "cannot write --out"),
    (M, ["--out={out}"], "is a directory"),
    # experiments.regression
    (R, ["--size=huge"], "unknown dataset 'huge'"),
    (R, ["--bias=maybe"], None),
    (R, ["--hidden=-5"], "hidden must list positive widths"),
    (R, ["--size=small", "--batch_size=1000"], "larger than the training set"),
    (R, ["--model=cnn"], "--model does not apply to experiments.regression"),
    (R, ["--dataset=mnist"], "--dataset does not apply to experiments.regression"),
    (R, ["--data_dir=/tmp"], "--data_dir applies to mnist and fashion"),
    (R, ["--out={out}/sub/x.json", "--lr=-1"], "lr must be a positive number"),
    # experiments.sweep
    (S, ["--lrs=abc"], "lrs must be numbers"),
    (S, ["--lrs=-0.1"], "lrs must be positive numbers"),
    (S, ["--lrs=nan"], "lrs must be positive numbers"),
    (S, ["--lrs=0.1,inf"], "lrs must be positive numbers"),
    (S, ["--lrs=0.1,0.1"], "lrs must be distinct"),
    (S, ["--lr=0.3"], "--lr does not apply to experiments.sweep: it sets the lr itself"),
    (S, ["--seed=5"], "--seed draws the regression net's data set only"),
    (S, ["--seeds=a-b"], "seeds must be like"),
    (S, ["--seeds=1,1"], "seeds must be distinct"),
    (S, ["--holdout=-1"], "holdout must be at least 0"),
    (S, ["--plot={out}/sweep"], "name a .png, .pdf, .svg file"),
    (S, ["--plot={out}/sweep.png", "--out={out}/sweep.png"], "--plot and --out name the same file"),
    (S, ["--population_chunk=-1"], "population_chunk must be at least 0"),
    (S, ["--impl=triton"], "triton"),
    (S, ["--data_parallel"], "--data_parallel splits the batch of one network"),
    (S, ["--out={out}"], "is a directory"),
    (S, ["--plot=/proc/jaxshallow/x.png"], "cannot write --plot"),
    (S, ["stray"], "unexpected arguments stray"),
    # experiments.parity
    (P, ["--impls=xla"], "--impls takes two impls"),
    (P, ["--impls=xla,nope"], "unknown impl 'nope'"),
    (P, ["--reference=float32"], "--reference must be impl or float64"),
    (P, ["--reference=float64", "--seeds=x"], "seeds must be"),
    (P, ["--point=nope"], "unknown grid points 'nope'"),
    (P, ["--reference=float64", "--point=mlp reference,mlp tf32"],
     "several points write their table to --out_dir"),
    (P, ["--point=mlp reference", "--out_dir={out}/p"], "--out_dir (several points) takes "
     "--reference=float64"),
    (P, ["--reference=float64", "--out_dir={out}/p"], "give --point"),
    (P, ["--merge=docs/bench/current/grid.json", "--out_dir={out}/p"],
     "is not a parity.json"),
    (P, ["--merge=a.json"], "--merge writes its table to --out_dir"),
    (P, ["--tolerance=-1"], "tolerance must be positive"),
    (P, ["--tolerance=inf"], "tolerance must be a finite number"),
    (P, ["--seeds=0,1"], "--seeds applies to --reference=float64"),
    (P, ["--reference=float64", "--tolerance=0.1"], "--tolerance applies to --reference=impl"),
    (P, ["--reference=float64", "--impls=xla,numpy"], "leave numpy out of --impls"),
    (P, ["--reference=float64", "--seeds=0,5000000000"], "--seeds must be an integer from 0 to 4294967295, got 5000000000"),
    (P, ["--out=/proc/jaxshallow/x.json"], "cannot write --out"),
    # experiments.check_kernels
    (C, ["--only=nope"], "unknown --only group(s) nope"),
    (C, ["--only="], "--only group(s) names none"),
    (C, ["--barrier_rounds=0"], "barrier_rounds must be at least 1"),
    (C, ["--epoch_cases=3"], "--epoch_cases must be FROM:TO (e.g. 0:6), got '3'"),
    (C, ["--epoch_cases=a:b"], "--epoch_cases must be FROM:TO (e.g. 0:6), got 'a:b'"),
    (C, ["--seed=-1"], "--seed must be an integer from 0 to 4294967295, got -1"),
    (C, ["stray"], "unexpected arguments stray"),
    # benchmarks.bench
    (B, ["--quick", "--workloads=nope"], "unknown --workloads nope"),
    (B, ["--quick", "--impls=nope"], "unknown --impls nope"),
    (B, ["--quick", "--workloads="], "--workloads names none"),
    (B, ["--quick", "--out_dir="], "--out_dir must name a folder"),
    (B, ["--quick", "--torch_modes=nope"], "unknown --torch_modes nope"),
    (B, ["--quick", "--repeats=0"], "repeats must be at least 1"),
    (B, ["--quick", "--batch_sizes=abc"], "batch_sizes must be positive integers"),
    (B, ["--quick", "--block_sweep=1,2"], "blocks must be 'auto' or three integers"),
    (B, ["--quick", "--technique_names=nope"], "unknown --technique_names nope"),
    (B, ["--quick", "--cnn_precisions=fp8"], "unknown --cnn_precisions fp8"),
    (B, ["--grid", "--quick", "--points=nope"], "unknown grid points 'nope'"),
    (B, ["--grid", "--quick", "--seeds=x"], "seeds must be"),
    (B, ["--grid", "--jobs=2"], "--jobs needs --grid --quick: the times of processes that share"),
    (B, ["--grid", "--quick", "--jobs=0"], "jobs must be at least 1"),
    (B, ["--quick", "--out_dir=/proc/jaxshallow"], "cannot write"),
    (B, ["--grid", "--merge=/nonexistent/grid.json"], "cannot read /nonexistent/grid.json"),
    (B, ["--grid", "--merge=docs/population_h100.json"], "is not a grid.json of benchmarks.bench"),
    (B, ["--grid", "--merge=docs/bench/current/grid.json", "--out_dir=/proc/jaxshallow"],
     "cannot write --out_dir"),
    (B, ["stray"], "unexpected arguments stray"),
    # benchmarks.population_bench
    (PB, ["--sizes=0"], "sizes must be positive integers"),
    (PB, ["--sizes=abc"], "sizes must be positive integers"),
    (PB, ["--device_counts=0"], "device_counts must be positive integers"),
    (PB, ["--impls=nope"], "unknown --impls nope"),
    (PB, ["--impls="], "--impls names none"),
    (PB, ["--dp_batch=-1"], "dp_batch must be at least 0"),
    (PB, ["--model=regression", "--dataset=small"], "the population bench measures the mlp, logreg and cnn models"),
    (PB, ["--out=/proc/jaxshallow/x.json"], "cannot write --out"),
    (PB, ["--plot={out}/bench.out"], "name a .png, .pdf, .svg file"),
    # benchmarks.kernel_times, benchmarks.floors
    (K, ["--batch=0"], "batch must be at least 1"),
    (K, ["--hidden=-1"], "hidden must be at least 1"),
    (K, ["--calls=0"], "calls must be at least 1"),
    (K, ["--triton_blocks=24,16,16"], "powers of two"),
    (K, ["--precision=fp8"], None),
    (F, ["--steps=0"], "steps must be at least 1"),
    (F, ["--repeats=0"], "repeats must be at least 1"),
    (F, ["stray"], "unexpected arguments stray"),
    # the probes: Hopper only, refused in one line on the CPU whatever the flags
    ("probes.cluster_exchange", ["--steps=3"], None),
    ("probes.cluster_regression", ["--hidden=100"], None),
    ("probes.warpgroup_costs", ["--repeats=0"], None),
    ("probes.tile_products", ["--repeats=0"], None),
    ("probes.phase_stream", ["--in_kb=7", "--out_kb=8"], "multiples of 8"),
    ("probes.phase_stream", ["--ctas=x"], None),
    ("experiments.parity", ["--float64_only"], "--float64_cache and --float64_only take"),
    ("experiments.parity", ["--reference=float64", "--float64_only"],
     "--float64_only keeps the float64 runs in --float64_cache"),
    ("probes.grid_regression", ["--steps=50"], "--steps must be above 100"),
    ("probes.grid_regression", ["--floor"], "--floor, --fetches: only --kernel=tile_regression"),
    ("probes.grid_regression", ["--fetches"], "--floor, --fetches: only --kernel=tile_regression"),
    ("probes.tile_mlp", ["--repeats=0"], "--repeats must be at least 1"),
    ("probes.cluster_floor", ["--steps=50"], "--steps must be above 100"),
    ("probes.cluster_floor", ["--precisions=float64"], "unknown --precisions float64"),
    ("probes.cluster_floor", [], "needs an NVIDIA Hopper"),
    ("probes.stream_population", ["--members=0"], "members"),
    ("probes.stream_population", ["--repeats=0"], "repeats must be at least 1"),
    ("probes.stream_population", ["--rounds=0"], "--rounds must be at least 1"),
    ("probes.stream_population", ["--forms=base,sideways"], "unknown --forms sideways"),
    ("probes.stream_population", ["--forms=base,base"], "--forms names a form twice"),
    ("probes.stream_population", ["--forms=base", "--floor"], "not with --profile or --floor"),
    ("probes.weight_stream", ["--rows=100"], "--rows must be a positive multiple of 64"),
    ("probes.weight_stream", ["--cols=256"], "--cols must be 64 or 128"),
    ("probes.weight_stream", ["--form=registers", "--warpgroups=3"], "--warpgroups must be 1 or 2"),
    ("probes.weight_stream", ["--form=registers", "--work=tensor"], "--form=registers times"),
    ("probes.weight_stream", ["--form=registers", "--reverse"], "--reverse is a --form=plain"),
    ("probes.same_module", ["--kernel=nope", "--save={out}/a"], "unknown"),
    ("probes.same_module", [], "give one of --save"),
    ("probes.same_module", ["--compare={out}/none.txt"], "no such file"),
    ("probes.same_module", ["--batch=100", "--save={out}/a"], "--batch must be 64 P rows"),
    ("probes.spills", [], None),
    ("probes.spills", ["--ptx={out}/none.ptx"], "none.ptx: no such file"),
    ("probes.spills", ["--ptx=README.md", "--bin={out}"], "no ptxas in"),
]
ABSL = ("FATAL Flags parsing error", "Pass --helpshort or --helpfull")


def test_the_table_covers_every_script():
  scripts = {s for s, _, _ in CASES}
  on_disk = {f"{d}.{f[:-3]}" for d in ("experiments", "benchmarks", "probes")
             for f in os.listdir(ROOT / d) if f.endswith(".py") and not f.startswith("_")}
  helpers = {"experiments.config_flags", "experiments.distributed_flags",
             "experiments.guard_flags", "benchmarks.grid", "benchmarks.quick",
             "benchmarks.torch_peer", "probes.hopper",
             "probes.weight_stream_kernel"}  # modules, not scripts
  assert on_disk - helpers <= scripts, on_disk - helpers - scripts
  assert len(CASES) >= 60


def cpu_env() -> dict:
  """The scripts' environment: this project importable, jax on the CPU."""
  return {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}


def python_m(script: str, args) -> subprocess.CompletedProcess:
  """A real ``python -m script *args``, to hold the forking server against."""
  return subprocess.run([sys.executable, "-m", script, *args], cwd=ROOT, env=cpu_env(),
                        capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def server():
  """One forking server a test worker (``forkrun``): each case still runs as ``python -m``
  in a process of its own, without importing jax again (170 cases took 179 s as fresh
  processes on a 2-core machine, 27 s this way)."""
  with forkrun.Server(cpu_env(), ROOT) as s:
    yield s


@pytest.mark.parametrize("script,args,message", CASES,
                         ids=[f"{s.split('.')[-1]}:{' '.join(a)}" for s, a, _ in CASES])
def test_bad_command_line_is_one_clear_line(script, args, message, tmp_path, server):
  out = tmp_path / "out"
  out.mkdir()
  args = [a.replace("{out}", str(out)) for a in args]
  env = {"JAXSHALLOW_DATA_DIR": str(tmp_path / "no-data"), "XDG_CACHE_HOME": str(tmp_path)}
  code, stdout, stderr = server.run(script, args, env)
  assert code != 0, stdout[-2000:] + stderr[-2000:]
  assert "Traceback" not in stderr, stderr[-3000:]
  lines = [l for l in stderr.splitlines() if l.strip() and not l.startswith(ABSL)]
  assert len(lines) <= 1, stderr
  if message is not None:
    assert message in stderr, stderr
  assert not any(out.iterdir()), list(out.iterdir())  # Nothing written.


# One bad command line of each of these scripts, run both ways (about 1.5 s a real process).
COMPARED = [next(c for c in CASES if c[0] == script and not any("{" in a for a in c[1]))
            for script in (M, R, S, P, C, B, PB)]


def _without_log_lines(err: str) -> str:
  """stderr without absl's log lines, which carry a time and a thread id."""
  return "\n".join(l for l in err.splitlines() if not re.match(r"[IWEF]\d{4} ", l))


@pytest.mark.parametrize("script,args,message", COMPARED, ids=[s for s, _, _ in COMPARED])
def test_the_server_runs_a_script_as_python_m_does(script, args, message, server):
  """The harness against a real ``python -m``: the same exit code, stdout and stderr."""
  real = python_m(script, args)
  code, out, err = server.run(script, args, {})
  assert (code, out, _without_log_lines(err)) == (
      real.returncode, real.stdout, _without_log_lines(real.stderr)), args
  assert code != 0 and (message is None or message in err)


def test_the_server_reports_tracebacks_timeouts_and_help(server, tmp_path):
  """A traceback's exit code and text, a command killed at its timeout (the server serving
  on), a help text's exit code and output as a real process's."""
  (tmp_path / "boom.py").write_text("raise KeyError('x')\n")
  code, out, err = server.run("boom", [], {}, path=[tmp_path])
  assert code == 1 and "Traceback" in err and "KeyError: 'x'" in err, (code, err)
  (tmp_path / "slow.py").write_text("import time; time.sleep(60)\n")
  with pytest.raises(TimeoutError):
    server.run("slow", [], {}, path=[tmp_path], timeout=1)
  real = python_m(M, ["--helpshort"])
  assert server.run(M, ["--helpshort"], {})[:2] == (real.returncode, real.stdout)
  with pytest.raises(ValueError, match="JAX_ENABLE_X64"):
    server.run(M, [], {"JAX_ENABLE_X64": "1"})
