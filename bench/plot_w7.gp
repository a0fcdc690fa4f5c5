# W7, the multi-process hand-off: owner changes per second and scripts
# per hand-off against the number of processes, one line per kind.  The
# data (report.awk -v mode=w7plot) has one row per N: N, then owner
# changes/s and scripts per hand-off of reentrant, fair, rwlock,
# semaphore, the floor and the looped floor (which run no script); "?"
# where a point is missing.  At N = 1 no owner changes:
# scripts are per acquisition there, and owner changes are not drawn.
set terminal svg size 1100,480 font "sans,11" background "white"
set output out
set datafile missing "?"
set multiplot layout 1,2 title "hilock-bench W7: N processes, each with its own client, on one lock"
set logscale x 2
set xrange [1:*]
set xlabel "processes (N)"
set grid xtics ytics
set key top right
set style data linespoints

set title "owner changes per second"
set ylabel "owner changes/s"
set yrange [0:*]
plot data using 1:2 title "reentrant" lc rgb "#2b6cb0" pt 7, \
     '' using 1:4 title "fair" lc rgb "#2f855a" pt 5, \
     '' using 1:6 title "rwlock (write)" lc rgb "#c05621" pt 9, \
     '' using 1:8 title "semaphore (1 permit)" lc rgb "#6b46c1" pt 11, \
     '' using 1:10 title "floor (bare processes, PUBLISH)" lc rgb "#000000" pt 13 dt 3, \
     '' using 1:12 title "floor with a loop thread" lc rgb "#000000" pt 6 dt 4

set title "scripts per hand-off (N = 1: per acquisition)"
set ylabel "scripts per hand-off"
set logscale y 10
set yrange [1:*]
plot data using 1:3 title "reentrant" lc rgb "#2b6cb0" pt 7, \
     '' using 1:5 title "fair" lc rgb "#2f855a" pt 5, \
     '' using 1:7 title "rwlock (write)" lc rgb "#c05621" pt 9, \
     '' using 1:9 title "semaphore (1 permit)" lc rgb "#6b46c1" pt 11, \
     3 title "target (3)" with lines dt 2 lc rgb "#718096"

unset multiplot
