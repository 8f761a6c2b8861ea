# Bandwidth against write size from `kvferry-bench transports --table=FILE`.
#   gnuplot -e "data='transports.dat'; out='docs/transports.png'" apps/bench/plot_transports.gp
# Columns: size_bytes shm memcpy tcp raw_tcp ucx_tcp ucx_posix raw_tcp_streams mooncake_tcp
# nixl_ucx shm_batched tcp_batched (the _batched: about 4 MiB of writes per batch, as the
# peers post them; the others one write per batch).
# (GB/s, NaN: not measured; raw_tcp_streams: as many raw streams as the tcp backend opens).
if (!exists("data")) data = 'transports.dat'
if (!exists("out")) out = 'docs/transports.png'
set terminal pngcairo size 960,760 noenhanced
set output out
set title "bandwidth by write size on loopback, one run (kvferry: one write per batch, 8 in flight, unless said)"
set xlabel "write size"
set ylabel "GB/s"
set logscale x 2
set logscale y 10
set grid
set key below maxcols 2
set datafile missing "NaN"
set xtics ("4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576, "4M" 4194304, "16M" 16777216)
plot data using 1:2 with linespoints lw 2 title "kvferry shm", \
     data using 1:3 with lines dt 2 lw 2 title "memcpy (1 thread)", \
     data using 1:4 with linespoints lw 2 title "kvferry tcp", \
     data using 1:5 with lines dt 2 lw 2 title "raw TCP stream", \
     data using 1:8 with lines dt 3 lw 2 title "raw TCP, one stream per tcp stream", \
     data using 1:6 with points pt 6 title "ucx_perftest put, tcp", \
     data using 1:7 with points pt 8 title "ucx_perftest put, posix (cache-hot)", \
     data using 1:9 with linespoints dt 4 lw 2 title "Mooncake transfer engine, tcp (4 MiB of writes per request)", \
     data using 1:10 with linespoints dt 5 lw 2 title "NIXL, UCX over tcp (4 MiB of writes per request)", \
     data using 1:12 with linespoints lw 3 title "kvferry tcp, 4 MiB of writes per batch"
