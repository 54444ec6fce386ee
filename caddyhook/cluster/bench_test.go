package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddyhook/caddyhook/caddyhook/cluster"
	"github.com/caddyhook/caddyhook/caddyhook/cluster/natscluster"
	"github.com/caddyhook/caddyhook/caddyhook/spool"
	"github.com/caddyhook/caddyhook/internal/natstest"
)

// BenchmarkAccept compares durable accept into the local bbolt spool with
// accept into the cluster queue on a 1-node and a 3-node (3 replicas)
// NATS JetStream, side by side, with concurrent writers as in a busy
// ingress:
//
//	go test -run '^$' -bench Accept -benchtime 5s ./caddyhook/cluster/
func BenchmarkAccept(b *testing.B) {
	body := []byte(`{"message":"bench event of a realistic small size, with some text in it","name":"Hook","sessionKey":"hook:bench","wakeMode":"now"}`)
	var seq atomic.Uint64
	next := func() *spool.Event {
		return &spool.Event{ID: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), seq.Add(1)), Kind: spool.KindAgent,
			Path: "/hooks/agent", Body: body, FirstSeen: time.Now()}
	}
	run := func(b *testing.B, appendFn func(context.Context, *spool.Event) error) {
		b.SetParallelism(16) // 16 × GOMAXPROCS writers
		b.ReportAllocs()
		b.ResetTimer() // the servers' start is not part of an accept
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := appendFn(ctx, next()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}

	b.Run("local-spool", func(b *testing.B) {
		st, err := spool.Open(spool.Config{Dir: b.TempDir()}, zap.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		run(b, func(ctx context.Context, ev *spool.Event) error { return st.Append(ctx, ev) })
	})
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nats-%d", nodes), func(b *testing.B) {
			var urls []string
			if nodes == 1 {
				urls = []string{natstest.Run(b, natstest.Options{}).URL()}
			} else {
				urls = natstest.RunCluster(b, nodes).URLs()
			}
			eng, err := natsEngine(urls, nodes)
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Cleanup()
			be, err := eng.Open(cluster.Params{Name: "bench", LockTTL: time.Minute, IdempotencyTTL: time.Minute,
				Queue: &cluster.QueueParams{}})
			if err != nil {
				b.Fatal(err)
			}
			sp, err := cluster.NewSpool(be, cluster.SpoolOptions{Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			run(b, func(ctx context.Context, ev *spool.Event) error {
				_, err := sp.Append(ctx, ev)
				return err
			})
		})
	}
}

// natsEngine returns an engine on urls with replicas.
func natsEngine(urls []string, replicas int) (*natscluster.NATS, error) {
	return natscluster.New(natscluster.Config{URLs: urls, Replicas: replicas, SigningKeys: []string{testSigningKey}}, nil)
}
