package slurmproto

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gresGoldenDirs are the captures of cluster/capture.sh gres (README.md,
// "GRES credentials"): stock 22.05, 24.11 and 26.05 nodes with 4 GPUs and 8
// shards, task/cgroup (-cg) or task/none (-nocg).
func gresGoldenDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("testdata/gres/r*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("only %d GRES capture directories", len(dirs))
	}
	return dirs
}

// gresWant is what each captured launch's credential holds for n1: the
// GPUs (bits of gres_bit_alloc) and shards of its job and step records.
type gresWant struct {
	frame              string
	jobGPUs, stepGPUs  int // set bits of the gpu records at n1 (-1: no record)
	jobShard, stepShrd uint64
}

var gresWants = []gresWant{
	{"batch_job_launch", 2, -1, 0, 0}, // a batch credential carries no step GRES
	{"launch_tasks_inner", 2, 2, 0, 0},
	{"launch_tasks_pertask", 2, 2, 0, 0},
	{"launch_tasks_shard", -1, -1, 2, 2},
	{"launch_tasks_mapgpu", 3, 3, 0, 0},
}

// TestGoldenGres_Creds: every captured credential's GRES job and step
// lists decode with the layout of the frame's release, pack back to the
// same bytes, and hold the allocation the job asked for.
func TestGoldenGres_Creds(t *testing.T) {
	for _, dir := range gresGoldenDirs(t) {
		for _, w := range gresWants {
			t.Run(filepath.Base(dir)+"/"+w.frame, func(t *testing.T) {
				fs, _ := filepath.Glob(filepath.Join(dir, w.frame+"_v*.bin"))
				if len(fs) != 1 {
					t.Fatalf("%d frames", len(fs))
				}
				fr, err := os.ReadFile(fs[0])
				if err != nil {
					t.Fatal(err)
				}
				m, err := DecodeMessage(fr[4:])
				if err != nil {
					t.Fatal(err)
				}
				v := m.Header.Version
				body, err := DecodeBody(v, m.Header.MsgType, m.Body)
				if err != nil {
					t.Fatal(err)
				}
				if re, err := EncodeBody(v, body); err != nil || !bytes.Equal(re, m.Body) {
					t.Fatalf("body re-encode: %v", err)
				}
				c := credOf(body)
				job, err := c.JobGres(v)
				if err != nil {
					t.Fatalf("job gres: %v", err)
				}
				step, err := c.StepGres(v)
				if err != nil {
					t.Fatalf("step gres: %v", err)
				}
				if re := EncodeGresJobStates(job, v); !bytes.Equal(re, c.GresJobState) {
					t.Errorf("job gres re-encode:\n got %x\nwant %x", re, c.GresJobState)
				}
				if re := EncodeGresStepStates(step, v); !bytes.Equal(re, c.GresStepState) {
					t.Errorf("step gres re-encode:\n got %x\nwant %x", re, c.GresStepState)
				}
				// The signed payload holds them as they are.
				if p, err := os.ReadFile(payloadPath(fs[0])); err == nil {
					if !bytes.Contains(p, c.GresJobState) || !bytes.Contains(p, c.GresStepState) {
						t.Error("gres lists not in the signed payload")
					}
				} else if w.frame != "batch_job_launch" { // credpayload.py cuts step credentials only
					t.Errorf("no cred payload: %v", err)
				}
				gotJob, gotJobShard := gresAt(job, len(job), func(i int) (uint32, []*Bitmap, []uint64) {
					return job[i].PluginID, job[i].BitAlloc, job[i].CntNodeAlloc
				})
				gotStep, gotStepShard := gresAt(step, len(step), func(i int) (uint32, []*Bitmap, []uint64) {
					return step[i].PluginID, step[i].BitAlloc, step[i].CntNodeAlloc
				})
				if gotJob != w.jobGPUs || gotStep != w.stepGPUs || gotJobShard != w.jobShard || gotStepShard != w.stepShrd {
					t.Errorf("job gpus %d shards %d, step gpus %d shards %d; want %+v\njob %+v\nstep %+v",
						gotJob, gotJobShard, gotStep, gotStepShard, w, job, step)
				}
				if v >= Version2411 {
					for _, r := range step {
						if r.PluginID == GresBuildID("shard") && (len(r.PerBitAlloc) != int(r.NodeCnt) || r.PerBitAlloc[0] == nil) {
							t.Errorf("24.11+ shard step record without per-bit counts: %+v", r)
						}
					}
				}
				if strings.Contains(dir, "r2205") && v != Version2205 || !strings.Contains(dir, "r2205") && v == Version2205 {
					t.Errorf("frame version 0x%04x in %s", v, dir)
				}
			})
		}
	}
}

// gresAt sums a list's gpu bits and shard counts on node 0 (n1 is the only
// node of the capture).
func gresAt[T any](_ []T, n int, rec func(int) (uint32, []*Bitmap, []uint64)) (gpus int, shards uint64) {
	gpus = -1
	for i := 0; i < n; i++ {
		id, bits, cnt := rec(i)
		switch id {
		case GresBuildID("gpu"):
			if gpus < 0 {
				gpus = 0
			}
			if len(bits) > 0 && bits[0] != nil {
				gpus += bits[0].Count()
			}
		case GresBuildID("shard"):
			if len(cnt) > 0 {
				shards += cnt[0]
			}
		}
	}
	return gpus, shards
}
