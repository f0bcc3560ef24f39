"""Draws success_1m.png beside it from the exported runs r2d2_1m/, beta0_1m/, ngu_zs_1m/,
ngu_zs_cmr_1m/, ngu_zs_split/ (stopped at 0.6M) and ngu_zs_uniform_1m/.

Run from the repository root: python docs/results/minigrid_pilot/doorkey5/plot_success_1m.py
"""
import sys, matplotlib; matplotlib.use("Agg")
import matplotlib.pyplot as plt
from ngu_jax import plotting
root = "docs/results/minigrid_pilot/doorkey5"
fig, axes = plt.subplots(3, 2, figsize=(10, 9.6), sharey=True, sharex=True)
axes = axes.ravel()
for ax, (v, title) in zip(axes, [("r2d2_1m", "R2D2 (N = 1, beta = 0)"), ("beta0_1m", "beta0 (N = 8, beta = 0)"),
                              ("ngu_zs_1m", "NGU ngu_zs (r^i standardised)"), ("ngu_zs_cmr_1m", "NGU ngu_zs_cmr (and cross mixture ratio 0.5)"),
                              ("ngu_zs_split", "ngu_zs + split values (stopped at 0.6M)"),
                              ("ngu_zs_uniform_1m", "ngu_zs, uniform replay (priority exponent 0)")]):
    for s in range(3):
        d = plotting.read_metrics(f"{root}/{v}/seed_{s}/metrics.csv.gz")
        ok = ~(d["eval_success"] != d["eval_success"])
        ax.plot(d["env_steps"][ok], d["eval_success"][ok], marker="o", ms=3, label=f"seed {s} greedy")
        ax.plot(d["env_steps"], d["episode_success_rate"], ls=":", color=ax.lines[-1].get_color(), label=f"seed {s} training")
    ax.axhline(0.082, color="grey", lw=0.8, label="chance")
    ax.set_title(title); ax.set_xlabel("env steps"); ax.grid(alpha=0.3)
for ax in axes[::2]:
    ax.set_ylabel("success")
h, l = axes[1].get_legend_handles_labels(); fig.legend(h, l, fontsize=7, loc="lower center", ncol=7)
fig.suptitle("DoorKey-5x5, 1M env steps: greedy (j = 0, eps 0.01) and training success per seed", fontsize=10)
fig.tight_layout(rect=(0, 0.04, 1, 1)); fig.savefig(f"{root}/success_1m.png", dpi=110)
