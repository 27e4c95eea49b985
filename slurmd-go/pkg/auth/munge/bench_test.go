//go:build cgo

package munge

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/tiee-hpc/tiee/slurmd-go/pkg/auth"
)

// The payload every RPC carries: 0x02 || K12 digest.
var benchPayload = auth.Payload(0x2600, 1008, nil, auth.HashK12)

func BenchmarkMungeEncode(b *testing.B) {
	m := newMunge(b, Options{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := m.Encode(ctx, benchPayload, auth.UIDAny); err != nil {
			b.Fatal(err)
		}
	}
}

// encodeN makes n fresh credentials (a decoded one would be a replay).
func encodeN(b *testing.B, m *Munge, n int) []string {
	b.Helper()
	creds := make([]string, n)
	for i := range creds {
		c, err := m.Encode(context.Background(), benchPayload, auth.UIDAny)
		if err != nil {
			b.Fatal(err)
		}
		creds[i] = c
	}
	return creds
}

// BenchmarkMungeDecode is the per-RPC cost of verifying a credential on the
// receive path, serially: one decode at a time against munged.
func BenchmarkMungeDecode(b *testing.B) {
	m := newMunge(b, Options{})
	ctx := context.Background()
	creds := encodeN(b, m, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Decode(ctx, creds[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMungeDecodeParallel is the throughput munged sustains with many
// concurrent callers (GOMAXPROCS goroutines x -cpu; use -cpu 1,4,16,64
// style runs with SetParallelism to see munged's thread limit).
func BenchmarkMungeDecodeParallel(b *testing.B) {
	m := newMunge(b, Options{})
	ctx, cancel := context.WithCancel(context.Background()) // a ctx with Done: the goroutine path
	defer cancel()
	creds := encodeN(b, m, b.N)
	var next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Decode(ctx, creds[next.Add(1)-1]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkMungeEncodeParallel(b *testing.B) {
	m := newMunge(b, Options{})
	ctx := context.Background()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := m.Encode(ctx, benchPayload, auth.UIDAny); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
