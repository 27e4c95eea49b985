//go:build integration

package integration

import (
	"testing"
	"time"

	"github.com/tiee-hpc/tiee/slurmd-go/integration/cluster"
)

// TestBatch_RegistrationListsRunningJob: a registration that did not list
// a running batch job makes slurmctld fail it once BatchStartTimeout +
// MessageTimeout have passed (_purge_missing_jobs). `scontrol reconfigure`
// makes every node re-register while the job runs; the job must run on
// and complete.
func TestBatch_RegistrationListsRunningJob(t *testing.T) {
	opts := batchOptions("")
	opts.Nodes = 1
	opts.ExtraConf = append(opts.ExtraConf, "BatchStartTimeout=2")
	c := cluster.Start(t, opts)
	id := c.Sbatch(t, "root", "#!/bin/bash\nsleep 25\necho survived\n")
	c.WaitJob(t, id, 30*time.Second, "RUNNING")
	// Past BatchStartTimeout + MessageTimeout since the start, twice.
	for i := 0; i < 2; i++ {
		c.MustRun(t, "", "scontrol", "reconfigure")
		time.Sleep(c.MessageTimeout + 3*time.Second)
		if f := c.ShowJob(t, id); f["JobState"] != "RUNNING" {
			t.Fatalf("after a re-registration the job is %s (Reason=%s), want RUNNING", f["JobState"], f["Reason"])
		}
	}
	f := c.WaitJob(t, id, 60*time.Second, "COMPLETED")
	if f["ExitCode"] != "0:0" {
		t.Fatalf("ExitCode %s", f["ExitCode"])
	}
}
