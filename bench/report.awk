#!/usr/bin/awk -f
# Turn hilock-bench's JSON lines into the README table (default) or the
# plot's data (-v mode=plot).  The lines come from hilock-bench, whose
# field order is fixed, so plain pattern matching is enough.

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

# The W1 point of this run with the same C, api and busy polling as line
# l; 0 if none.
function w1_twin(l,    j, m) {
    for (j = 1; j <= n; j++) {
        m = line[j]
        if (field(m, "workload") == "W1" && field(m, "error") == "" &&
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

END {
    if (mode == "plot") {
        for (i = 1; i <= n; i++) {
            l = line[i]
            w = field(l, "workload")
            if (w == "WD" || field(l, "error") != "")
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
            # The ceiling is one server's; W4 spreads over five.
            printf "\"%s\" %s %s\n", label, field(l, "cycles_per_s"),
                   w == "W4" ? 0 : lock_ceiling(c)
        }
        exit
    }
    print "| workload | C | S | api | busy poll | cycles/s | lock ceiling | ratio | p50 µs | p99 µs | max µs | owner changes/s | Jain | violations | check |"
    print "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    for (i = 1; i <= n; i++) {
        l = line[i]
        w = field(l, "workload")
        if (w == "WD")
            continue
        c = field(l, "C")
        ceil = w == "W4" ? 0 : lock_ceiling(c)
        cyc = field(l, "cycles_per_s")
        if (field(l, "kind") == "fair")
            w = w " fair"
        ratio = ceil > 0 ? sprintf("%.2f", cyc / ceil) : ""
        printf "| %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
            w, c, field(l, "S"), field(l, "api"), field(l, "busy_poll_us"),
            cyc, (ceil > 0 ? sprintf("%.0f", ceil) : ""), ratio, field(l, "p50_us"), field(l, "p99_us"),
            field(l, "max_us"), field(l, "owner_changes_per_s"),
            field(l, "jain"), field(l, "violations"),
            field(l, "stock_check") field(l, "error")
    }
    redlock_ratios()
    for (i = 1; i <= n; i++) {
        l = line[i]
        if (field(l, "workload") != "WD")
            continue
        printf "\nWD: %s watchdog leases (timeout %s ms) held %s s: %s renewals/s, %s lost, %s alive at the end, %s %% CPU, %s bytes per lease beyond its name.\n",
            field(l, "leases"), field(l, "watchdog_ms"),
            field(l, "duration_s"), field(l, "cycles_per_s"),
            field(l, "lost"), field(l, "alive_at_end"), field(l, "cpu_pct"),
            field(l, "bytes_per_lease")
    }
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
