package rlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

// The operator queries, read over RESP2 and RESP3.
func TestOperatorQueries(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		for _, protocol := range []int{2, 3} {
			t.Run(fmt.Sprintf("resp%d", protocol), func(t *testing.T) {
				locks := newLocks(t, s.client(t, func(o *redis.Options) { o.Protocol = protocol }), rlock.WithWatchdogLease(300*time.Millisecond))
				k := key(t, "q")
				h, err := locks.Lock(k, rlock.Fenced()).Acquire(bg())
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(bg())
				defer cancel()
				go func() { _, _ = locks.Lock(k, rlock.Wait(5*time.Second)).Acquire(ctx) }()
				var ws []rlock.Waiter
				eventually(2*time.Second, func() bool { ws, _ = locks.Waiters(bg(), k); return len(ws) == 1 })
				if len(ws) != 1 || ws[0].Kind != "lock" || ws[0].ClientID == 0 {
					t.Fatalf("waiters %+v", ws)
				}
				info, err := locks.Info(bg(), k)
				if err != nil || info.Holders[h.Owner()] != 1 || info.Blocked != 1 || info.Token != h.Token() || info.PTTL <= 0 {
					t.Fatalf("info %+v %v", info, err)
				}
				found, err := locks.Scan(bg(), k)
				if err != nil || len(found) != 1 || found[0].Key != k || found[0].Kind != "lock" || found[0].Holders[h.Owner()] != 1 {
					t.Fatalf("scan %+v %v", found, err)
				}
				stats, err := locks.Stats(bg())
				if n, ok := stats[0].Number("blocked"); err != nil || !ok || n < 1 {
					t.Fatalf("stats %+v %v", stats, err)
				}
				cancel()
				eventually(2*time.Second, func() bool { ws, _ = locks.Waiters(bg(), k); return len(ws) == 0 })
				top, err := locks.Top(bg(), 1000)
				if err != nil {
					t.Fatal(err)
				}
				seen := false
				for _, c := range top {
					seen = seen || strings.HasSuffix(c.Key, ":q") && c.Key == k
				}
				if !seen {
					t.Fatalf("%s not in the top %+v", k, top)
				}
				if ok, err := locks.ForceRelease(bg(), k); err != nil || !ok {
					t.Fatal(ok, err)
				}
				<-h.Lost()
			})
		}
	})
}
