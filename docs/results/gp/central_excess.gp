# central_excess.gp — written by ldpref-train report; from the results directory: gnuplot gp/central_excess.gp
set terminal svg size 800,560 dynamic noenhanced font 'sans,13' background rgb 'white'
set output 'central_excess.svg'
set grid lc rgb '#dddddd'
set logscale xy
set key bottom left font 'sans,11' box
set title 'Exponential mechanism: expected excess loss per label'
set format y '%.0e'
set xrange [166.667:24000]
set xlabel 'n (labels)'
set ylabel 'excess loss per label'
plot '-' using 1:2 with linespoints lw 2 lc 1 title 'eps = 0.25', '-' using 1:2 with lines dt 2 lc 1 title 'its bound (8/eps) ln(K/zeta) / n', '-' using 1:2 with linespoints lw 2 lc 2 title 'eps = 1', '-' using 1:2 with lines dt 2 lc 2 title 'its bound (8/eps) ln(K/zeta) / n', '-' using 1:2 with linespoints lw 2 lc 3 title 'eps = 4', '-' using 1:2 with lines dt 2 lc 3 title 'its bound (8/eps) ln(K/zeta) / n'
250 0.148981
1000 0.0376166
4000 0.00831715
16000 0.000700679
e
250 1.31244
1000 0.32811
4000 0.0820275
16000 0.0205069
e
250 0.0397672
1000 0.00804431
4000 0.000729244
16000 5.67164e-05
e
250 0.32811
1000 0.0820275
4000 0.0205069
16000 0.00512672
e
250 0.00727047
1000 0.000700389
4000 2.20092e-05
16000 5.08357e-06
e
250 0.0820275
1000 0.0205069
4000 0.00512672
16000 0.00128168
e
