#!/usr/bin/awk -f
# Turn hilock-bench's JSON lines into the README table (default), the
# plot's data (-v mode=plot) or the W7 plot's (-v mode=w7plot).  The lines
# come from hilock-bench, whose field order is fixed, so plain pattern
# matching is enough.

function field(line, name,    m) {
    if (match(line, "\"" name "\":\"[^\"]*\"")) {
        m = substr(line, RSTART, RLENGTH)
        sub("^\"" name "\":\"", "", m)
        sub("\"$", "", m)
        return m
    }
    if (match(line, "\"" name "\":-?[0-9.]+")) {
        m = substr(line, RSTART, RLENGTH)
        sub("^\"" name "\":", "", m)
        return m
    }
    return ""
}

{
    w = field($0, "workload")
    if (w ~ /^ceiling:/) {
        key = w "/" field($0, "C") "/" field($0, "P")
        ceiling[key] = field($0, "cycles_per_s")
        next
    }
    n++
    line[n] = $0
}

# The most a lock can do at concurrency c: half the EVALSHA-acquire rate
# at -P 16 (one cycle is two scripted requests); at C = 1, -P 1.
function lock_ceiling(c, p) {
    p = c == 1 ? 1 : 16
    if (c == 8 || c == 1 || c == 50 || c == 64)
        return ceiling["ceiling:EVALSHA-acquire/" c "/" p] / 2
    return 0
}

# W3's segments on each master of a cluster row, as "a/b/c"; "" if none.
function per_master(line,    m) {
    if (!match(line, "\"segments_per_master\":\\[[0-9,]*\\]"))
        return ""
    m = substr(line, RSTART, RLENGTH)
    sub("^[^[]*\\[", "", m)
    sub("\\]$", "", m)
    gsub(",", "/", m)
    return m
}

# The W1 point of this run with the same C, api and busy polling as line
# l, on one server; 0 if none.
function w1_twin(l,    j, m) {
    for (j = 1; j <= n; j++) {
        m = line[j]
        if (field(m, "workload") == "W1" && field(m, "error") == "" &&
            field(m, "topology") == "" &&
            field(m, "C") == field(l, "C") &&
            field(m, "api") == field(l, "api") &&
            field(m, "busy_poll_us") == field(l, "busy_poll_us"))
            return j
    }
    return 0
}

# RedLock's targets, each against W1 measured in the same run: C = 1
# acquire p50 at most 2 x W1's, C = 50 throughput at least 0.25 x W1's.
function redlock_ratios(    i, l, j, m, c, shown, r) {
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "workload") != "W4" || field(l, "error") != "")
            continue
        c = field(l, "C")
        j = w1_twin(l)
        if ((c != 1 && c != 50) || j == 0)
            continue
        m = line[j]
        if (!shown++) {
            print ""
            print "RedLock (W4, 5 masters) against W1 in this run:"
            print ""
            print "| C | api | busy poll | measure | W4 | W1 | W4 / W1 | target |"
            print "| ---: | --- | ---: | --- | ---: | ---: | ---: | --- |"
        }
        if (c == 1) {
            r = field(m, "p50_us") > 0 ? field(l, "p50_us") / field(m, "p50_us") : 0
            printf "| 1 | %s | %s | acquire p50 µs | %s | %s | %.2f | <= 2 (%s) |\n",
                field(l, "api"), field(l, "busy_poll_us"), field(l, "p50_us"),
                field(m, "p50_us"), r, (r <= 2 ? "met" : "not met")
        } else {
            r = field(m, "cycles_per_s") > 0 ? field(l, "cycles_per_s") / field(m, "cycles_per_s") : 0
            printf "| 50 | %s | %s | cycles/s | %.0f | %.0f | %.2f | >= 0.25 (%s) |\n",
                field(l, "api"), field(l, "busy_poll_us"),
                field(l, "cycles_per_s"), field(m, "cycles_per_s"), r,
                (r >= 0.25 ? "met" : "not met")
        }
    }
}

# The async point of this run with the same workload, kind, C, S, busy
# polling and topology as line l; 0 if none.
function async_twin(l,    j, m) {
    for (j = 1; j <= n; j++) {
        m = line[j]
        if (field(m, "api") == "async" && field(m, "error") == "" &&
            field(m, "topology") == field(l, "topology") &&
            field(m, "workload") == field(l, "workload") &&
            field(m, "kind") == field(l, "kind") &&
            field(m, "C") == field(l, "C") && field(m, "S") == field(l, "S") &&
            field(m, "busy_poll_us") == field(l, "busy_poll_us"))
            return j
    }
    return 0
}

# The blocking API against the async one, each sync point with its async
# twin of the same run: the targets of W1 C=1 (0.9), W1 C=50 (0.6), W2
# C=64 (0.8, owner changes) and W3 S=16 (0.6), and how far the sync W1
# C=1 points of the run lie from their median (within 25 %).
function sync_ratios(    i, l, j, m, shown, r, target, w, k, v, t, med, dev, worst) {
    k = 0
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "api") != "sync" || field(l, "error") != "" ||
            field(l, "busy_poll_us") > 0 || field(l, "topology") != "")
            continue
        w = field(l, "workload")
        if (w == "W1" && field(l, "C") == 1)
            v[++k] = field(l, "cycles_per_s")
        j = async_twin(l)
        if (j == 0)
            continue
        m = line[j]
        target = ""
        if (w == "W1" && field(l, "C") == 1) target = 0.9
        if (w == "W1" && field(l, "C") == 50) target = 0.6
        if (w == "W2" && field(l, "C") == 64 && field(l, "kind") != "fair") target = 0.8
        if (w == "W3" && field(l, "S") == 16) target = 0.6
        if (!shown++) {
            print ""
            print "The blocking API against the async one in this run:"
            print ""
            print "| workload | C | S | sync cycles/s | async cycles/s | sync / async | target |"
            print "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
        }
        r = field(m, "cycles_per_s") > 0 ? field(l, "cycles_per_s") / field(m, "cycles_per_s") : 0
        printf "| %s | %s | %s | %.0f | %.0f | %.2f | %s |\n",
            w (field(l, "kind") == "fair" ? " fair" : ""), field(l, "C"),
            field(l, "S"), field(l, "cycles_per_s"), field(m, "cycles_per_s"), r,
            target == "" ? "" : sprintf(">= %s (%s)", target,
                                        r >= target ? "met" : "not met")
    }
    if (k >= 3) {
        # The median of the sync W1 C=1 points, and the furthest from it.
        for (i = 1; i <= k; i++)
            for (j = i + 1; j <= k; j++)
                if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
        med = v[int((k + 1) / 2)]
        worst = 0
        for (i = 1; i <= k; i++) {
            dev = (v[i] - med) / med
            if (dev < 0) dev = -dev
            if (dev > worst) worst = dev
        }
        printf "\nSync W1 C=1, %d points back to back: median %.0f cycles/s, the furthest %.0f %% from it (target: within 25 %%, %s).\n",
            k, med, 100 * worst, worst <= 0.25 ? "met" : "not met"
    }
}

# The cluster rows, each against the single-node point of the same
# workload, kind, C, S and api in this run (hilock-bench pairs them and
# writes the ratio as vs_single): at least 0.5 each.
function cluster_ratios(    i, l, shown, r, w) {
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "topology") != "cluster")
            continue
        w = field(l, "workload")
        if (w == "WD")
            continue
        if (!shown++) {
            print ""
            printf "Redis Cluster (%s masters, %s replicas per master) against one server in this run:\n",
                field(l, "servers"), field(l, "replicas")
            print ""
            print "| workload | C | S | api | cluster cycles/s | one server cycles/s | cluster / one server | segments per master | target |"
            print "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |"
        }
        if (field(l, "kind") == "fair")
            w = w " fair"
        if (field(l, "error") != "") {
            printf "| %s | %s | %s | %s | %s | | | | |\n", w, field(l, "C"),
                field(l, "S"), field(l, "api"), field(l, "error")
            continue
        }
        r = field(l, "vs_single")
        printf "| %s | %s | %s | %s | %.0f | %s | %s | %s | %s |\n",
            w, field(l, "C"), field(l, "S"), field(l, "api"),
            field(l, "cycles_per_s"),
            r == "" ? "" : sprintf("%.0f", field(l, "single_cycles_per_s")),
            r == "" ? "" : sprintf("%.2f", r), per_master(l),
            r == "" ? "no single-node point" : sprintf(">= 0.5 (%s)", r >= 0.5 ? "met" : "not met")
    }
}

# The replicated rows: each policy against replicas=none at the same
# workload, kind, C and api, on the same kind of master (N replicas).
# The issue's aim: W1 C=50 under all at least half of none.
function replicated_ratios(    i, l, shown, base, k, r, w, ack, target) {
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "topology") != "replicated")
            continue
        k = field(l, "workload") "/" field(l, "kind") "/" field(l, "C") "/" field(l, "api") "/" field(l, "replicas")
        if (field(l, "ack") == "none" && field(l, "error") == "")
            base[k] = field(l, "cycles_per_s")
    }
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "topology") != "replicated")
            continue
        if (!shown++) {
            print ""
            printf "A master with %s replicas, each replica acknowledgement policy against replicas=none:\n",
                field(l, "replicas")
            print ""
            print "| workload | C | api | replicas= | cycles/s | p50 µs | p99 µs | vs none | target |"
            print "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- |"
        }
        w = field(l, "workload")
        if (field(l, "kind") == "fair")
            w = w " fair"
        ack = field(l, "ack")
        if (field(l, "error") != "") {
            printf "| %s | %s | %s | %s | %s | | | | |\n", w, field(l, "C"),
                field(l, "api"), ack, field(l, "error")
            continue
        }
        k = field(l, "workload") "/" field(l, "kind") "/" field(l, "C") "/" field(l, "api") "/" field(l, "replicas")
        r = (k in base) && base[k] > 0 ? field(l, "cycles_per_s") / base[k] : ""
        target = ""
        if (field(l, "workload") == "W1" && field(l, "C") == 50 && ack == "all")
            target = r == "" ? ">= 0.5 (no replicas=none point)" : sprintf(">= 0.5 (%s)", r >= 0.5 ? "met" : "not met")
        printf "| %s | %s | %s | %s | %.0f | %s | %s | %s | %s |\n",
            w, field(l, "C"), field(l, "api"), ack, field(l, "cycles_per_s"),
            field(l, "p50_us"), field(l, "p99_us"),
            r == "" ? "" : sprintf("%.2f", r), target
    }
}

# W7, the multi-process hand-off: the points of each kind by N.  The
# last line of a kind and N wins; w7_n lists the Ns seen, w7_kinds the
# kinds, in the order hilock-bench runs them.
function w7_collect(    i, l, k, c, j, t) {
    w7_nn = 0
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "workload") != "W7")
            continue
        k = field(l, "kind")
        c = field(l, "C") + 0
        w7[k "/" c] = i
        w7_has_kind[k] = 1
        if (!(c in w7_seen)) {
            w7_seen[c] = 1
            w7_n[++w7_nn] = c
        }
    }
    for (i = 1; i <= w7_nn; i++)
        for (j = i + 1; j <= w7_nn; j++)
            if (w7_n[j] < w7_n[i]) { t = w7_n[i]; w7_n[i] = w7_n[j]; w7_n[j] = t }
    w7_nall = split("reentrant fair rwlock semaphore floor floor-loop", w7_all, " ")
    w7_nk = 0
    w7_nlocks = 0
    for (i = 1; i <= w7_nall; i++) {
        if (!(w7_all[i] in w7_has_kind))
            continue
        w7_kinds[++w7_nk] = w7_all[i]
        if (w7_all[i] !~ /^floor/)
            w7_locks[++w7_nlocks] = w7_all[i]
    }
}

# The time a hand-off of kind k takes at N = 64 beyond its time at N = 2
# (µs, from owner changes/s), as "+12 µs"; missing when either is absent.
function w7_growth(k, missing,    a, b, ta, tb) {
    a = w7_at(k, 64)
    b = w7_at(k, 2)
    if (!a || !b || field(line[a], "owner_changes_per_s") <= 0 ||
        field(line[b], "owner_changes_per_s") <= 0)
        return missing
    ta = 1e6 / field(line[a], "owner_changes_per_s")
    tb = 1e6 / field(line[b], "owner_changes_per_s")
    return sprintf("%+.0f µs", ta - tb)
}

# A target's table cell: the owner changes/s of line a over line b's,
# met when at least min (below 0: not judged); missing when either point
# (or b's rate) is not there.
function changes_ratio(a, b, min, missing,    r) {
    if (!a || !b || field(line[b], "owner_changes_per_s") <= 0)
        return missing " |"
    r = field(line[a], "owner_changes_per_s") / field(line[b], "owner_changes_per_s")
    return sprintf(" %.0f / %.0f = %.2f%s |", field(line[a], "owner_changes_per_s"),
        field(line[b], "owner_changes_per_s"), r,
        min < 0 ? "" : " (" met(r >= min) ")")
}

# The W7 line of kind k at N = c, if measured: its line number, else 0.
function w7_at(k, c,    i) {
    if (!((k "/" c) in w7))
        return 0
    i = w7[k "/" c]
    return field(line[i], "error") == "" ? i : 0
}

# The W2 point of this run at C = 8 of kind k on the api given (one
# server, no busy polling), for W7 N = 8; 0 if none.
function w2_twin8(k, api,    j, m) {
    for (j = 1; j <= n; j++) {
        m = line[j]
        if (field(m, "workload") == "W2" && field(m, "error") == "" &&
            field(m, "topology") == "" && field(m, "C") == 8 &&
            field(m, "kind") == k && field(m, "api") == api &&
            field(m, "busy_poll_us") == 0)
            return j
    }
    return 0
}

function met(ok) {
    return ok ? "met" : "not met"
}

function w7_table(    i, j, k, c, l, hdr, sep, row, worst, worst_n, v, a, b, r, f) {
    w7_collect()
    if (w7_nn == 0)
        return
    print ""
    print "W7, the multi-process hand-off: N processes, each with its own client, on one lock (per hand-off: per owner change; at N = 1, per acquisition):"
    print ""
    hdr = "| N |"
    sep = "| ---: |"
    for (j = 1; j <= w7_nk; j++) {
        k = w7_kinds[j]
        hdr = hdr sprintf(" %s: owner changes/s | scripts per hand-off | server CPU µs per hand-off | max wait ms |", k)
        sep = sep " ---: | ---: | ---: | ---: |"
    }
    print hdr
    print sep
    for (i = 1; i <= w7_nn; i++) {
        c = w7_n[i]
        row = "| " c " |"
        for (j = 1; j <= w7_nk; j++) {
            k = w7_kinds[j]
            if ((k "/" c) in w7 && field(line[w7[k "/" c]], "error") != "") {
                row = row " error: " field(line[w7[k "/" c]], "error") " | | | |"
                continue
            }
            l = w7_at(k, c) ? line[w7_at(k, c)] : ""
            if (l == "") {
                row = row " | | | |"
                continue
            }
            row = row sprintf(" %.0f | %s | %s | %.1f |",
                field(l, "owner_changes_per_s"), field(l, "scripts_per_handoff"),
                field(l, "server_cpu_us_per_handoff"), field(l, "max_us") / 1000)
        }
        print row
    }
    print ""
    hdr = "| target |"
    sep = "| --- |"
    for (j = 1; j <= w7_nlocks; j++) {
        hdr = hdr " " w7_locks[j] " |"
        sep = sep " --- |"
    }
    print hdr
    print sep
    # Scripts per hand-off, the most over N up to 128.
    row = "| scripts per hand-off <= 3 at every N up to 128 |"
    for (j = 1; j <= w7_nlocks; j++) {
        k = w7_locks[j]
        worst = -1
        for (i = 1; i <= w7_nn; i++) {
            c = w7_n[i]
            if (c > 128 || !w7_at(k, c))
                continue
            v = field(line[w7_at(k, c)], "scripts_per_handoff")
            if (v != "" && v + 0 > worst) { worst = v + 0; worst_n = c }
        }
        row = row (worst < 0 ? " |" : sprintf(" %.2f at N=%d (%s) |", worst, worst_n, met(worst <= 3)))
    }
    print row
    row = "| owner changes/s at N=64 >= 0.9 x N=2 |"
    for (j = 1; j <= w7_nlocks; j++) {
        k = w7_locks[j]
        row = row changes_ratio(w7_at(k, 64), w7_at(k, 2), 0.9, "")
    }
    print row
    row = "| owner changes/s at N=8 >= 0.5 x W2 C=8 of the kind |"
    for (j = 1; j <= w7_nlocks; j++) {
        k = w7_locks[j]
        a = w7_at(k, 8)
        row = row changes_ratio(a, w2_twin8(k, "async"), 0.5, a ? " no W2 C=8 point" : "")
    }
    print row
    # W7's processes wait on the blocking API: the same ratio against W2
    # on it, shown beside the target, which reads the async point.
    row = "| owner changes/s at N=8 / W2 C=8 sync of the kind (W7's API; not a target) |"
    for (j = 1; j <= w7_nlocks; j++) {
        k = w7_locks[j]
        a = w7_at(k, 8)
        row = row changes_ratio(a, w2_twin8(k, "sync"), -1, a ? " no W2 C=8 sync point" : "")
    }
    print row
    # What N adds to a hand-off, against what it adds to the floors'.
    if (w7_at("floor", 64) && w7_at("floor", 2)) {
        row = "| time per hand-off at N=64 beyond N=2 (the floor's: " w7_growth("floor", "") \
            (w7_at("floor-loop", 64) && w7_at("floor-loop", 2) ? ", with a loop thread: " w7_growth("floor-loop", "") : "") \
            "; not a target) |"
        for (j = 1; j <= w7_nlocks; j++)
            row = row " " w7_growth(w7_locks[j], "") " |"
        print row
    }
    row = "| max wait at N=128 <= 2 x the fair lock's |"
    f = w7_at("fair", 128)
    for (j = 1; j <= w7_nlocks; j++) {
        k = w7_locks[j]
        a = w7_at(k, 128)
        if (k == "fair" || !a || !f || field(line[f], "max_us") <= 0) {
            row = row (k == "fair" && f ? sprintf(" %.1f ms (the reference) |", field(line[f], "max_us") / 1000) : " |")
            continue
        }
        r = field(line[a], "max_us") / field(line[f], "max_us")
        row = row sprintf(" %.1f ms, %.2f x (%s) |", field(line[a], "max_us") / 1000, r, met(r <= 2))
    }
    print row
}

# The W7 plot's data: one row per N, two columns per kind and floor
# (owner changes/s and scripts per hand-off), "?" where there is no
# figure.  One process changes no owner: its row has scripts per
# acquisition only.
function w7_plot(    i, j, k, c, l, row) {
    w7_collect()
    for (i = 1; i <= w7_nn; i++) {
        c = w7_n[i]
        row = c
        for (j = 1; j <= w7_nall; j++) {
            k = w7_all[j]
            l = w7_at(k, c) ? line[w7_at(k, c)] : ""
            if (l == "" || field(l, "scripts_per_handoff") == "")
                row = row " ? ?"
            else if (k ~ /^floor/) # no scripts: none on a log scale
                row = row " " (c == 1 ? "?" : field(l, "owner_changes_per_s")) " ?"
            else
                row = row " " (c == 1 ? "?" : field(l, "owner_changes_per_s")) \
                    " " field(l, "scripts_per_handoff")
        }
        print row
    }
}

# WD on one server, then on the cluster beside it.
function wd_lines(    i, l, single_cpu, single_bytes, where) {
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "workload") != "WD")
            continue
        if (field(l, "error") != "") {
            printf "\nWD%s: %s\n", field(l, "topology") == "cluster" ? " on the cluster" : "",
                field(l, "error")
            continue
        }
        where = ""
        if (field(l, "topology") == "cluster")
            where = sprintf(" on the cluster (%s masters)", field(l, "servers"))
        printf "\nWD%s: %s watchdog leases (timeout %s ms) held %s s: %s renewals/s, %s lost, %s alive at the end, %s %% CPU, %s bytes per lease beyond its name",
            where, field(l, "leases"), field(l, "watchdog_ms"),
            field(l, "duration_s"), field(l, "cycles_per_s"),
            field(l, "lost"), field(l, "alive_at_end"), field(l, "cpu_pct"),
            field(l, "bytes_per_lease")
        if (where != "" && single_cpu != "")
            printf " (one server: %s %% CPU, %s bytes per lease; %s renewal scripts for %s renewals here)",
                single_cpu, single_bytes, field(l, "renew_calls"), field(l, "renewed")
        print "."
        if (where == "") {
            single_cpu = field(l, "cpu_pct")
            single_bytes = field(l, "bytes_per_lease")
        }
    }
}

# W8, the condition variable: one sentence per point.
function w8_lines(    i, l, how, waits) {
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "workload") != "W8")
            continue
        if (field(l, "error") != "") {
            printf "\nW8: %s\n", field(l, "error")
            continue
        }
        how = "flat out"
        if (field(l, "pace_us") > 0)
            how = "producers working " field(l, "pace_us") " µs between items"
        # With no wait ended by a signal the percentiles are of nothing.
        if (field(l, "wakeups") > 0)
            waits = sprintf("over %s wake-up%s (from the latest signal to the wait's return holding the lock) p50 %s µs, p99 %s µs, max %s µs",
                field(l, "wakeups"), field(l, "wakeups") == 1 ? "" : "s",
                field(l, "p50_us"), field(l, "p99_us"), field(l, "max_us"))
        else
            waits = "no wait was ended by a signal in the window"
        printf "\nW8, the condition variable: a bounded buffer of 16 items, %d producer and %d consumer processes, each with its own client, on one lock and its conditions not-full and not-empty, %s: %.0f items/s; %s; %s scripts and %s µs of server CPU per item; %s violations.\n",
            field(l, "C") / 2, field(l, "C") / 2,
            how,
            field(l, "cycles_per_s"), waits,
            field(l, "scripts_per_handoff"),
            field(l, "server_cpu_us_per_handoff"), field(l, "violations")
    }
}

END {
    if (mode == "w7plot") {
        w7_plot()
        exit
    }
    if (mode == "plot") {
        for (i = 1; i <= n; i++) {
            l = line[i]
            w = field(l, "workload")
            if (w == "WD" || w == "W7" || w == "W8" || field(l, "error") != "")
                continue
            c = field(l, "C")
            label = w (field(l, "kind") == "fair" ? " fair" : "") " C=" c
            if (w == "W3")
                label = label " S=" field(l, "S")
            api = field(l, "api")
            if (api == "sync")
                label = label " sync"
            if (field(l, "busy_poll_us") > 0)
                label = label " busy"
            if (field(l, "topology") == "cluster")
                label = label " cluster"
            if (field(l, "topology") == "replicated")
                label = label " replicas=" field(l, "ack")
            # The ceiling is one server's; W4 and the cluster rows spread
            # over several.
            printf "\"%s\" %s %s\n", label, field(l, "cycles_per_s"),
                   w == "W4" || field(l, "topology") != "" ? 0 : lock_ceiling(c)
        }
        exit
    }
    print "| workload | C | S | api | busy poll | cycles/s | lock ceiling | ratio | p50 µs | p99 µs | max µs | owner changes/s | Jain | violations | check |"
    print "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    for (i = 1; i <= n; i++) {
        l = line[i]
        w = field(l, "workload")
        if (w == "WD" || w == "W7" || w == "W8")
            continue
        c = field(l, "C")
        ceil = w == "W4" || field(l, "topology") != "" ? 0 : lock_ceiling(c)
        cyc = field(l, "cycles_per_s")
        if (field(l, "kind") == "fair")
            w = w " fair"
        if (field(l, "topology") == "cluster")
            w = w " cluster"
        if (field(l, "topology") == "replicated")
            w = w " replicas=" field(l, "ack")
        ratio = ceil > 0 ? sprintf("%.2f", cyc / ceil) : ""
        printf "| %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
            w, c, field(l, "S"), field(l, "api"), field(l, "busy_poll_us"),
            cyc, (ceil > 0 ? sprintf("%.0f", ceil) : ""), ratio, field(l, "p50_us"), field(l, "p99_us"),
            field(l, "max_us"), field(l, "owner_changes_per_s"),
            field(l, "jain"), field(l, "violations"),
            field(l, "stock_check") field(l, "error") \
            (field(l, "max_inside") != "" ? "max inside " field(l, "max_inside") : "")
    }
    redlock_ratios()
    sync_ratios()
    cluster_ratios()
    replicated_ratios()
    wd_lines()
    w7_table()
    w8_lines()
    print ""
    print "Ceiling rows (redis-benchmark, requests/s):"
    print ""
    print "| command | C | P | requests/s |"
    print "| --- | ---: | ---: | ---: |"
    for (k in ceiling) {
        split(k, parts, "/")
        sub("^ceiling:", "", parts[1])
        printf "| %s | %s | %s | %.0f |\n", parts[1], parts[2], parts[3],
               ceiling[k] | "sort -t'|' -k2,2 -k3n -k4n"
    }
    close("sort -t'|' -k2,2 -k3n -k4n")
}
