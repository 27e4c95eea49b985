package rpcserver

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkRoundTrip measures one Slurm-style RPC (connect, one frame, one reply, close) per
// iteration against both server kinds; run with -cpu to vary client parallelism.
func BenchmarkRoundTrip(b *testing.B) {
	payload := bytes.Repeat([]byte{0x5a}, 512)
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			s := start(b, k, Config{ConnTimeout: 10 * time.Second, Loops: 2}, echo())
			addr := s.Addr().String()
			req := encode(payload)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, len(req))
				for pb.Next() {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := c.Write(req); err != nil {
						b.Error(err)
					}
					if _, err := io.ReadFull(c, buf); err != nil || binary.BigEndian.Uint32(buf) != uint32(len(payload)) {
						b.Errorf("reply: %v", err)
					}
					_ = c.Close()
				}
			})
		})
	}
}
