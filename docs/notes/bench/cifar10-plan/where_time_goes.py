"""Where GEM's, A-GEM's and GSS's time goes on the reduced ResNet-18 (split_cifar10_jpeg, mir_code, one thread).

python docs/notes/bench/cifar10-plan/where_time_goes.py METHOD [TASK] [BATCHES]: the run built as scripts/bench.py
--measure stream builds it (benchmark.train_per_class=110: 21 batches per task), tasks 0..TASK-1 trained whole
(their task ends included: the memory fills), then BATCHES incoming batches of task TASK under torch.profiler;
prints the operators by self CPU time and cProfile's functions by cumulative time.
"""

import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "src")]
os.environ.setdefault("DATA_DIR", "/work/shared/datasets")

import hydra  # noqa: E402
import torch  # noqa: E402

import bench  # noqa: E402

method, task, n = (
    sys.argv[1],
    int(sys.argv[2]) if len(sys.argv) > 2 else 4,
    int(sys.argv[3]) if len(sys.argv) > 3 else 5,
)
torch.set_num_threads(1)
from clsuite.run.runtime import keep_freed_memory  # noqa: E402

keep_freed_memory()  # as a run does (clsuite.run.record), and scripts/bench.py --measure stream
with hydra.initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
    from clsuite.core.callbacks import MemoryUpdate

    over = bench.stream_overrides("split_cifar10_jpeg", method, False, ["benchmark.train_per_class=110"], "mir_code")
    run = bench.Run(bench.compose(over), lambda dm: [MemoryUpdate()])
    for k in range(task):
        run.fit(k)
    run.fit(task, 1)  # one batch outside the profile (the fit's first-batch costs)
    t0, c0 = time.perf_counter(), time.process_time()
    prof = cProfile.Profile()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tp:
        prof.enable()
        run.learner.on_train_end = lambda: None  # the task end is not the per-batch cost
        run.fit(task, n)
        prof.disable()
    print(
        f"{method} task {task}: {n} batches, {1e3 * (time.process_time() - c0) / n:.0f} CPU ms/batch "
        f"(wall {1e3 * (time.perf_counter() - t0) / n:.0f}; both with the profilers' overhead)"
    )
    print(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
