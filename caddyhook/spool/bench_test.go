package spool

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// BenchmarkAppend measures durable appends of one 1 KiB agent event with
// 1, 8 or 32 concurrent writers (b.N appends in total), reporting commits
// (fsyncs) per append and the p50/p99 latency of one Append.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s, err := Open(Config{Dir: b.TempDir()}, zap.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			body := bytes.Repeat([]byte("x"), 1024)
			lat := make([][]time.Duration, writers)
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for w := range writers {
				n := b.N / writers
				if w < b.N%writers {
					n++
				}
				wg.Go(func() {
					for i := range n {
						ev := &Event{ID: fmt.Sprintf("b%d-%d", w, i), Kind: KindAgent, Path: "/hooks/agent", Body: body}
						start := time.Now()
						if err := s.Append(context.Background(), ev); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(start))
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			st := s.Stats()
			b.ReportMetric(float64(st.Commits)/float64(st.Appended), "commits/append")
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
