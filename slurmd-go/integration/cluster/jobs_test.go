package cluster

import (
	"regexp"
	"testing"
)

func TestParseShowJob(t *testing.T) {
	line := "JobId=30 JobName=n m UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=0 " +
		"JobState=PENDING Reason=launch_failed_requeued_held Dependency=(null) Requeue=1 Restarts=1 " +
		"BatchFlag=1 ExitCode=0:0 TRES=cpu=1,mem=100M,node=1,billing=1 Socks/Node=* " +
		"NtasksPerN:B:S:C=0:0:*:* NodeList= StdOut=/tmp/x/slurm-30.out Power=\n"
	f := ParseShowJob(line)
	for k, want := range map[string]string{
		"JobId": "30", "JobName": "n m", "JobState": "PENDING", "Reason": "launch_failed_requeued_held",
		"Restarts": "1", "ExitCode": "0:0", "TRES": "cpu=1,mem=100M,node=1,billing=1", "Socks/Node": "*",
		"NtasksPerN:B:S:C": "0:0:*:*", "NodeList": "", "StdOut": "/tmp/x/slurm-30.out", "Power": "",
	} {
		if got, ok := f[k]; !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, want)
		}
	}
}

func TestRandomNodePrefix(t *testing.T) {
	re := regexp.MustCompile(`^b[a-z]{4}n$`)
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		p := RandomNodePrefix()
		if !re.MatchString(p) {
			t.Fatalf("RandomNodePrefix() = %q, want %s", p, re)
		}
		seen[p] = true
	}
	if len(seen) < 10 {
		t.Errorf("RandomNodePrefix gave only %d distinct prefixes in 20 draws", len(seen))
	}
}
