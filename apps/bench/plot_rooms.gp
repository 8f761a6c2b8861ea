# Rooms per second against rooms in flight from `kvferry-bench rooms --table=FILE`.
#   gnuplot -e "data='rooms.dat'; out='docs/rooms.png'" apps/bench/plot_rooms.gp
# Columns: inflight, rooms/s for each TP the run measured (tp1 tp2 tp4 tp8;
# NaN: not measured), and 1 / CAF's request/response round trip (same run).
if (!exists("data")) data = 'rooms.dat'
if (!exists("out")) out = 'docs/rooms.png'
set terminal pngcairo size 960,600 noenhanced
set output out
set title "kvferry: one-page rooms per second between two processes, by rooms in flight"
set xlabel "rooms in flight"
set ylabel "rooms/s"
set logscale x 2
set logscale y 10
set grid
set key left top
set datafile missing "NaN"
set yrange [100:50000]
columns = int(system("awk 'NR == 1 { print NF }' ".data))
plot for [c=2:columns-1] data using 1:c with linespoints lw 2 title columnhead(c), \
     data using 1:columns with lines dt 2 lw 2 title "1 / CAF round trip (unpipelined)", \
     20000 with lines dt 3 lw 1 title "issue 16 target: 20,000 rooms/s"
