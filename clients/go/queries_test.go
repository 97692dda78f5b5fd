package rlock_test

import (
	"context"
	"errors"
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

// The calls the shared vectors asked for: a lock's IsHeld and RemainingLease, ScanType,
// MultiLock.Do with names given twice and unsorted, Semaphore.Release of permits never
// acquired, leased permits many at once and returned by id, a campaign with a wait.
func TestVectorCallsOnServers(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		locks := newLocks(t, c)
		k := key(t, "lock")
		lock := locks.Lock(k, rlock.Lease(5*time.Second))
		if held, err := lock.IsHeld(bg()); err != nil || held {
			t.Fatalf("held before the acquire: %v %v", held, err)
		}
		if _, ok, err := lock.RemainingLease(bg()); err != nil || ok {
			t.Fatalf("a lease on a free lock: %v %v", ok, err)
		}
		h, err := lock.Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		if held, err := lock.IsHeld(bg()); err != nil || !held {
			t.Fatalf("not held after the acquire: %v %v", held, err)
		}
		if held, err := locks.Lock(k).IsHeld(bg()); err != nil || held {
			t.Fatalf("held by another handle's owner: %v %v", held, err)
		}
		if d, ok, err := lock.RemainingLease(bg()); err != nil || !ok || d <= 4*time.Second || d > 5*time.Second {
			t.Fatalf("lease left %v %v %v", d, ok, err)
		}
		rw := locks.RWLock(k + ":rw")
		r, err := rw.Read().Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		onlyRW, err := locks.ScanType(bg(), k+"*", "RWLOCK")
		if err != nil || len(onlyRW) != 1 || onlyRW[0].Key != k+":rw" {
			t.Fatalf("RLOCK.SCAN TYPE RWLOCK: %+v %v", onlyRW, err)
		}
		onlyLocks, err := locks.ScanType(bg(), k+"*", "LOCK")
		if err != nil || len(onlyLocks) != 1 || onlyLocks[0].Key != k {
			t.Fatalf("RLOCK.SCAN TYPE LOCK: %+v %v", onlyLocks, err)
		}
		_, _ = r.Release(bg())
		_, _ = h.Release(bg())

		a, b := "{"+k+"}:b", "{"+k+"}:a"
		multi := locks.MultiLock([]string{a, b, a})
		err = multi.Do(bg(), func(ctx context.Context, mh *rlock.MultiHold) error {
			for _, name := range []string{a, b} {
				if n, _ := c.HGet(bg(), name, multi.OwnerID()).Int64(); n != 1 {
					t.Errorf("%s held %d times within Do, want once", name, n)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Exists(bg(), a, b).Result(); n != 0 {
			t.Fatal("MultiLock.Do left a lock held")
		}

		pool := locks.Semaphore(k + ":pool")
		if ok, err := pool.TrySetPermits(bg(), 0); err != nil || !ok {
			t.Fatalf("an empty semaphore: %v %v", ok, err)
		}
		if n, err := pool.Release(bg(), 2); err != nil || n != 2 {
			t.Fatalf("permits given without an acquire: %d %v", n, err)
		}

		slots := locks.PermitExpirableSemaphore(k+":slots", rlock.Lease(5*time.Second))
		if _, err := slots.TrySetPermits(bg(), 3); err != nil {
			t.Fatal(err)
		}
		some, err := slots.AcquireMany(bg(), 2)
		if err != nil || len(some) != 2 || some[0].ID() == some[1].ID() {
			t.Fatalf("two leased permits: %v %v", some, err)
		}
		if _, err := slots.AcquireMany(bg(), 2); !errors.Is(err, rlock.ErrNotAcquired) {
			t.Fatalf("two more of one left: %v", err)
		}
		if ok, err := slots.Release(bg(), some[0].ID()); err != nil || !ok {
			t.Fatalf("returned by id: %v %v", ok, err)
		}
		if ok, err := slots.Release(bg(), some[0].ID()); err != nil || ok {
			t.Fatalf("returned twice by id: %v %v", ok, err)
		}
		if ok, err := some[1].Release(bg()); err != nil || !ok {
			t.Fatalf("a held permit: %v %v", ok, err)
		}
		if n, _ := slots.Available(bg()); n != 3 {
			t.Fatalf("%d available, want 3", n)
		}

		leader, err := locks.Election(k+":e").Campaign(bg(), "node-a")
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		if _, err := locks.Election(k+":e", rlock.Wait(150*time.Millisecond)).Campaign(bg(), "node-b"); !errors.Is(err, rlock.ErrNotAcquired) || time.Since(started) < 140*time.Millisecond {
			t.Fatalf("a campaign for a while: %v after %v", err, time.Since(started))
		}
		_ = leader.Resign(bg())
	})
}
