#!/bin/sh
# Fail a deployment over under load once per replica acknowledgement
# policy and keep what the holders saw:
#   bench/results/<UTC time>-failover-policies.txt
# Each run is one of the suite's mutual-exclusion tests (kill -9 under
# Sentinel, SENTINEL FAILOVER, the Cluster's CLUSTER FAILOVER TAKEOVER
# and manual failover), its holders' clients set to the policy through
# HL_FAILOVER_POLICY: the test then reports its overlapping sections
# (support/contenders.h) instead of failing on them, since only the
# default promises none.  Usage: bench/failover-policies.sh [runs]
# (default 1) [policy ...] (default: none one majority all).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-1}
[ $# -gt 0 ] && shift
policies=${*:-none one majority all}
"$here/scripts/setup"
"$here/scripts/build" "$here/build"
stamp=$(date -u +%Y%m%d-%H%M%S)
out="$here/bench/results/$stamp-failover-policies.txt"
mkdir -p "$here/bench/results"
: >"$out"
for policy in $policies; do
    for test in test_sentinel_exclusion test_sentinel_graceful \
        test_cluster_takeover; do
        run=1
        while [ "$run" -le "$runs" ]; do
            echo "## $test replicas=$policy run $run" >>"$out"
            if HL_FAILOVER_POLICY=$policy "$here/build/tests/$test" \
                >"$out.log" 2>&1; then
                status=passed
            else
                status="failed (see the lines above)"
            fi
            grep -E '^(# |\[  (FAILED|ERROR) |ERROR)' "$out.log" >>"$out" ||
                true
            echo "## $test replicas=$policy run $run: $status" >>"$out"
            run=$((run + 1))
        done
    done
done
rm -f "$out.log"
echo "$out"
