#!/usr/bin/python3
"""Projects data-parallel training across N machines from one machine's measured figures, as
docs/SCALING.md explains: each step every machine computes on its own micro-batches for
compute_s, then the gradients cross the network once: ZeRO-1's reduce-scatter plus all-gather,
which a ring does in 2(N-1) steps carrying (N-1)/N of the float32 gradients each way, the same
as one ring all-reduce: 2(N-1)/N x 4P bytes / link bandwidth, plus 2(N-1) latencies. Nothing
overlaps, so efficiency = compute_s / (compute_s + comm_s).

  bench/mpi_projection.py --sgemm-gflops 95 --step-s 0.71 --step-tokens 2048 [--busbw-gbps 0.8]
prints the markdown tables of docs/SCALING.md."""
import argparse
import sys

MACHINES = [2, 4, 8, 16, 32, 64]
LINKS_GBIT = [10, 25, 100]


def gpt_params(n_layer, d, vocab, block):
    """GPT-2's parameter count: tied embeddings, learned positions, biases, two LayerNorms a layer."""
    per_layer = 12 * d * d + 13 * d
    return vocab * d + block * d + n_layer * per_layer + 2 * d


def comm_s(params, machines, bytes_per_s, latency_s):
    """Ring all-reduce (= reduce-scatter + all-gather) of float32 gradients."""
    return 2 * (machines - 1) / machines * 4 * params / bytes_per_s + 2 * (machines - 1) * latency_s


def table(title, params, compute_s, tokens, latency_s, extra_links):
    links = [(f"{g} Gb/s", g * 1e9 / 8) for g in LINKS_GBIT] + extra_links
    lines = [f"{title}: P = {params / 1e6:.2f} M, {4 * params / 1e6:.1f} MB of gradients, "
             f"{tokens} tokens per machine per step, compute {compute_s:.3f} s per step "
             f"({tokens / compute_s:.0f} tok/s on one machine)", ""]
    lines.append("| N | " + " | ".join(f"{name}: tok/s, efficiency" for name, _ in links) + " |")
    lines.append("|---|" + "---|" * len(links))
    for n in MACHINES:
        cells = []
        for _, bw in links:
            step = compute_s + comm_s(params, n, bw, latency_s)
            cells.append(f"{n * tokens / step:,.0f}, {compute_s / step:.3f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    # Accumulating more micro-batches per step lengthens compute and leaves the bytes alone.
    need = [f"{name} {9 * comm_s(params, MACHINES[-1], bw, latency_s) * tokens / compute_s:,.0f}" for name, bw in links]
    lines += ["", f"Tokens per machine per step for 0.9 efficiency at N = {MACHINES[-1]}: " + "; ".join(need) + "."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sgemm-gflops", type=float, required=True, help="OpenBLAS sgemm 1024^3, this machine")
    ap.add_argument("--step-s", type=float, required=True, help="6-layer/384 compute seconds per step, N = 1")
    ap.add_argument("--step-tokens", type=int, required=True, help="tokens in that step")
    ap.add_argument("--busbw-gbps", type=float, help="all-reduce bus bandwidth measured here, GB/s (extra column)")
    ap.add_argument("--latency-us", type=float, default=25.0, help="per ring step (default 25)")
    ap.add_argument("--vocab", type=int, default=65, help="6-layer/384's vocabulary (Tiny Shakespeare's characters)")
    ap.add_argument("--gpt2-tokens", type=int, default=8 * 1024, help="124M tokens per machine per step (8 x 1024)")
    a = ap.parse_args()
    if min(a.sgemm_gflops, a.step_s, a.step_tokens) <= 0:
        sys.exit("mpi_projection.py: --sgemm-gflops, --step-s and --step-tokens must be positive")
    extra = [(f"here ({a.busbw_gbps:.2f} GB/s)", a.busbw_gbps * 1e9)] if a.busbw_gbps else []
    lat = a.latency_us * 1e-6
    small = gpt_params(6, 384, a.vocab, 256)
    print(table("6-layer/384 GPT, block 256 (measured compute)", small, a.step_s, a.step_tokens, lat, extra))
    print()
    big = gpt_params(12, 768, 50257, 1024)
    # 6 P FLOPs per token (forward 2P, backward 4P) at the full sgemm rate.
    big_s = 6 * big * a.gpt2_tokens / (a.sgemm_gflops * 1e9)
    print(table(f"GPT-2 124M, block 1024 (compute = 6P FLOPs/token at sgemm's {a.sgemm_gflops:g} GFLOP/s)", big,
                big_s, a.gpt2_tokens, lat, extra))


if __name__ == "__main__":
    main()
