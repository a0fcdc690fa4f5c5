# hilock against the lock ceiling (half the EVALSHA-acquire rate of
# redis-benchmark at -P 16, same C; at C = 1, -P 1), per workload point.
set terminal svg size 1000,520 font "sans,11" background "white"
set output out
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel "lock cycles per second"
set yrange [0:*]
set grid ytics
set xtics rotate by -30 left
set key top right
set title "hilock-bench: hilock against the ceiling of the same redis-server"
plot data using 2:xtic(1) title "hilock" lc rgb "#2b6cb0", \
     '' using 3 title "ceiling (EVALSHA/2)" lc rgb "#a0aec0"
