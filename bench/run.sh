#!/bin/sh
# Run the whole benchmark on this machine and keep the results:
#   bench/results/<UTC time>.jsonl   one JSON line per point
#   bench/results/latest.md          the table for bench/README.md
#   bench/results/latest.svg         hilock against the ceiling
#   bench/results/latest-w7.svg      W7: owner changes/s and scripts per
#                                    hand-off against the processes
# Set-up as for the tests (scripts/setup), plus gnuplot for the plot.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup"
if ! command -v gnuplot >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox \
        </dev/null
fi
"$here/scripts/build" "$here/build"
stamp=$(date -u +%Y%m%d-%H%M%S)
out="$here/bench/results/$stamp.jsonl"
mkdir -p "$here/bench/results"
# The cluster rows come after the single-node ones, in the same run, so
# that each is read against its single-node twin.  They measure the
# topology, so they run without replica acknowledgement, as the single
# server (no replicas) does; what acknowledgement costs is the
# replicated rows' question.
"$here/build/bench/hilock-bench" --cluster --cluster-ack none "$@" >"$out"
# The cost of replica acknowledgement: W1 C=1, W1 C=50 and W2 C=64 on a
# master with 2 replicas, under each policy, read against replicas=none.
for ack in none one all; do
    "$here/build/bench/hilock-bench" --replicas 2 --ack "$ack" "$@" >>"$out"
done
cp "$out" "$here/bench/results/latest.jsonl"
"$here/bench/report.awk" "$out" >"$here/bench/results/latest.md"
"$here/bench/report.awk" -v mode=plot "$out" >"$here/bench/results/latest.dat"
gnuplot -e "data='$here/bench/results/latest.dat'" \
    -e "out='$here/bench/results/latest.svg'" "$here/bench/plot.gp"
"$here/bench/report.awk" -v mode=w7plot "$out" \
    >"$here/bench/results/latest-w7.dat"
gnuplot -e "data='$here/bench/results/latest-w7.dat'" \
    -e "out='$here/bench/results/latest-w7.svg'" "$here/bench/plot_w7.gp"
echo "results: $out"
