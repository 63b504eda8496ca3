"""The CIFAR-10 row's plan from the bench runs of this folder (docs/notes/PERFORMANCE.md, "The CIFAR-10 row's plan").

python docs/notes/bench/cifar10-plan/plan.py: per method, the CPU ms per incoming batch (mean over the tasks
with replay; GEM: at the last task) and its ratio to ER's in the same bench run, the CPU-hours of a full run (5 tasks
x 950 incoming batches, task 0 without replay; Joint: 4,750 batches of its one fit), the seeds planned, the total.

A full run, per method: sum over tasks t of 950 x (CPU ms per batch at t) + its task ends + its evaluations.
The runs (RUN_OF): a for most, c (oEWC) and g (GSS) after their fix, h (GEM, A-GEM) to task 4 (its first 5
batches); g and h with the runs' allocator setting (scripts/bench.py's stream since then); A-GEM from task 1 on as at tasks 2-4 (its reference batch: 256 from task 1 of a full run, whose task 0
fills the memory; 208 in the bench's task 1). Task ends: iCaRL's herding and oEWC's Fisher go over the task's
images, 208 in the bench (train_per_class=110), 9,500 in a full run (x 9500/208); HAL's anchors take a fixed
number of steps (x 1). Evaluations: ER's measured CPU s per evaluation (10,000 test images, run e), 6 per run
(b and a row of R per task), Joint's 2.
"""

import json
from pathlib import Path

HERE = Path(__file__).parent
BATCHES, TASKS, FULL_TASK, BENCH_TASK = 950, 5, 9500, 208
FIFTEEN = {"er", "mir", "ccmr", "ebrs", "adaer"}
ORDER = ["er", "online", "joint", "agem", "gem", "oewc", "si", "icarl", "hal", "gss", "mir", "ccmr", "ebrs", "adaer"]
SCALED_END = {"icarl", "oewc"}  # task-end work over the task's images
# the run of each method: oEWC and GSS after their fix (c, g), GEM and A-GEM to task 4 (h), else a
RUN_OF = {"oewc": "c", "gss": "g", "gem": "h", "agem": "h"}


def rows():
    for run in "abcdfgh":
        f = HERE / run / "bench-stream.json"
        if f.exists():
            for r in json.loads(f.read_text())["rows"]:
                if "tasks" in r:
                    yield run, r


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs)


def main():
    found, er = {}, {}
    for run, r in rows():
        fits = {x["task"]: x for x in r["tasks"]}
        if r["method"] == "er":
            er[run] = fits
        if run == RUN_OF.get(r["method"], "a"):
            found[r["method"]] = (run, fits)
    ev = json.loads((HERE / "e" / "bench-stream.json").read_text())["rows"][0]["eval_cpu_s"]
    body, total, hours_of = [], 0.0, {}
    for m in [m for m in ORDER if m in found]:
        run, fits = found[m]
        if m == "joint":
            x = fits["joint"]
            t0, later = "-", x["cpu_ms_per_batch"]
            ratio = later / mean(er[run][k]["cpu_ms_per_batch"] for k in er[run])
            shown, train_s, evals = "union", TASKS * BATCHES * later / 1e3, 2
        else:
            replay = [k for k in fits if k >= 1]
            t0 = f"{fits[0]['cpu_ms_per_batch']:.0f}"
            if m == "gem":  # grows with the past tasks: the last task's, and each task's in the full run
                later = fits[max(replay)]["cpu_ms_per_batch"]
                ratio = later / er[run][max(replay)]["cpu_ms_per_batch"]
                shown = f"{max(replay)} ({fits[max(replay)]['batches']} batches)"
            else:  # the mean over the tasks with replay (A-GEM: from task 2, its full 256)
                replay = [k for k in replay if m != "agem" or k >= 2] or replay
                later = mean(fits[k]["cpu_ms_per_batch"] for k in replay)
                ratio = later / mean(er[run][k]["cpu_ms_per_batch"] for k in replay)
                shown = f"{min(replay)}-{max(replay)}"
            per_t = [fits[t]["cpu_ms_per_batch"] if t in fits else None for t in range(TASKS)]
            if m == "gem" and None in per_t:  # linear in the past tasks
                slope = per_t[2] - per_t[1]
                per_t = [per_t[t] if per_t[t] is not None else per_t[2] + (t - 2) * slope for t in range(TASKS)]
            elif m == "agem":
                per_t = [per_t[0]] + [later] * (TASKS - 1)
            else:
                per_t = [per_t[0]] + [p if p is not None else later for p in per_t[1:]]
            ends = [fits[t]["end_cpu_s"] for t in fits]
            end_s = mean(ends) * TASKS * (FULL_TASK / BENCH_TASK if m in SCALED_END else 1.0)
            train_s, evals = BATCHES * sum(per_t) / 1e3 + end_s, 6
        hours = (train_s + evals * ev) / 3600
        hours_of[m] = hours
        seeds = 15 if m in FIFTEEN else 5 if hours < 2 else 3
        total += seeds * hours
        body.append(f"| {m} | {run} | {t0} | {shown} | {later:.0f} | {ratio:.2f} | {hours:.2f} | {seeds} | "
                    f"{seeds * hours:.1f} |")  # fmt: skip
    print(f"evaluation: {ev:.1f} CPU s per 10,000 test images (ER, run e)")
    print("| method | run | CPU ms/batch task 0 | tasks | CPU ms/batch there | vs ER | CPU-h per run | seeds | CPU-h |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    print("\n".join(body))
    print(f"| total | | | | | | | | {total:.1f} |")
    core = sum(hours_of[m] for m in FIFTEEN)
    rest = {m: h for m, h in hours_of.items() if m not in FIFTEEN}
    rule = {m: h * (5 if h < 2 else 3) for m, h in rest.items()}  # the nine others at the rule's seeds
    heavy = ("gem", "agem")
    print(f"the five at 15 seeds, the nine others at 3: {15 * core + 3 * sum(rest.values()):.1f} CPU-h")
    print(f"the five at 10 seeds, the nine others as planned: {10 * core + sum(rule.values()):.1f} CPU-h")
    print(f"the five at 10 seeds, the nine others at 3: {10 * core + 3 * sum(rest.values()):.1f} CPU-h")
    print(f"as planned but GEM and A-GEM: {15 * core + sum(v for m, v in rule.items() if m not in heavy):.1f} CPU-h "
          f"(GEM and A-GEM as planned: {sum(rule[m] for m in heavy):.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
