# failed-lines.awk: from `go test -v` output, the t.Log and t.Error lines (with up to 3
# continuation lines each) of the tests that failed, grouped by test. go test -v
# names the test before each run of its lines ("=== RUN/NAME/CONT X"), so interleaved
# parallel tests can be told apart. The harness's banners and daemon-log tails are left
# out: they are in the full log. MAX (default 40) bounds the lines printed.
BEGIN { if (MAX == "") MAX = 40 }
/^=== (RUN|NAME|CONT|PAUSE)[ \t]/ { cur = $3; cont = 0; next }
/^[ \t]*--- FAIL: / { name = $3; failed[name] = 1; order[++nf] = name; cont = 0; next }
/^[ \t]*--- (PASS|SKIP): / { cont = 0; next }
# the harness's cluster banners and log dumps name no cause
/^[ \t]*[A-Za-z0-9_]+\.go:[0-9]+: (cluster ti[0-9a-f]+: impl=|reference ti[0-9a-f]+ \(|==== |cluster ti[0-9a-f]+ \(|cluster ti[0-9a-f]+: kept )/ { cont = 0; next }
/^[ \t]*[A-Za-z0-9_]+\.go:[0-9]+: / {
	n[cur]++; lines[cur, n[cur]] = substr($0, 1, 400); cont = 3; next
}
/^[ \t]+/ && cont > 0 { n[cur]++; lines[cur, n[cur]] = substr($0, 1, 400); cont--; next }
{ cont = 0 }
END {
	out = 0
	for (i = 1; i <= nf; i++) {
		t = order[i]
		# a parent fails with its subtests; print only tests that logged lines themselves
		if (n[t] == 0) continue
		if (out < MAX) { print "  " t ":"; out++ }
		for (j = 1; j <= n[t] && out < MAX; j++) { print lines[t, j]; out++ }
	}
	if (nf > 0 && out == 0) for (i = 1; i <= nf; i++) print "  --- FAIL: " order[i]
}
