package gres

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzLoad: any gres.conf text gives records or an error, never a panic
// or a hang (missing File= entries are not waited for).
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-1 Links=-1,2\nName=shard Count=8\n",
		"AutoDetect=nvml\nNodeName=t[1-2] Name=gpu Count=2k Flags=nvidia_gpu_env,explicit\n",
		"NodeName=t1 Name=mps Count=100 File=/dev/nvidia0\nInclude other.conf\n",
		"Name=gpu MultipleFiles=/dev/nvidia[0-3]\nName=nic Count=2 Bogus=1\n",
	} {
		f.Add(s, "gpu:a100:2,shard:8,mps:100")
	}
	f.Fuzz(func(t *testing.T, conf, nodeGres string) {
		dir := t.TempDir()
		p := filepath.Join(dir, "gres.conf")
		if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, v := range []uint16{v2205, v2411, v2605} {
			n, err := Load(context.Background(), Options{ConfPath: p, NodeName: "t1", CPUs: 4, Version: v,
				GresTypes: []string{"gpu", "shard", "mps", "nic"}, NodeGres: nodeGres,
				FileWait: time.Nanosecond, Exists: func(string) error { return nil }})
			_ = PrintLines(n, err)
		}
	})
}
