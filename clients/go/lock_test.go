package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

func newLocks(t *testing.T, c redis.UniversalClient, opts ...rlock.LocksOption) *rlock.Locks {
	l := rlock.New(c, opts...)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func hcount(t *testing.T, c *redis.Client, k, owner string) int64 {
	n, err := c.HGet(bg(), k, owner).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestC01_AcquireReenterRelease(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		locks := newLocks(t, c)
		k := key(t, "orders")
		lock := locks.Lock(k, rlock.Fenced())
		outer, err := lock.Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		inner, err := lock.Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		if outer.Count() != 1 || inner.Count() != 2 || outer.Token() != inner.Token() || outer.Token() < 1 {
			t.Fatalf("counts %d %d tokens %d %d", outer.Count(), inner.Count(), outer.Token(), inner.Token())
		}
		if n := hcount(t, c, k, lock.OwnerID()); n != 2 {
			t.Fatalf("hold count %d, want 2", n)
		}
		other, err := locks.Lock(k).Acquire(bg())
		if !errors.Is(err, rlock.ErrNotAcquired) || other != nil {
			t.Fatalf("a second owner got %v, %v", other, err)
		}
		if free, err := inner.Release(bg()); err != nil || free {
			t.Fatalf("first release: %v %v", free, err)
		}
		if n := hcount(t, c, k, lock.OwnerID()); n != 1 {
			t.Fatalf("hold count %d, want 1", n)
		}
		if free, err := outer.Release(bg()); err != nil || !free {
			t.Fatalf("second release: %v %v", free, err)
		}
		if n, _ := c.Exists(bg(), k).Result(); n != 0 {
			t.Fatal("the lock is still there")
		}
		if _, err := outer.Release(bg()); !errors.Is(err, rlock.ErrNotHeld) {
			t.Fatalf("a second release of one hold: %v", err)
		}
		// Owner scopes share one id: re-entry across handles.
		scope := locks.Owner()
		a, err := scope.Lock(k).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		b, err := scope.Lock(k).Acquire(bg())
		if err != nil || b.Count() != 2 {
			t.Fatalf("scope re-entry: %v %v", b, err)
		}
		_, _ = b.Release(bg())
		_, _ = a.Release(bg())
	})
}

func TestC02_WaitInTheServer(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		locks := newLocks(t, c)
		k := key(t, "q")
		holder, err := locks.Lock(k).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		type grant struct {
			i  int
			at time.Time
			h  *rlock.Hold
		}
		grants := make(chan grant, 3)
		for i := 0; i < 3; i++ {
			go func(i int) {
				h, err := locks.Lock(k, rlock.Wait(10*time.Second)).Acquire(bg())
				if err != nil {
					t.Error(err)
					return
				}
				grants <- grant{i, time.Now(), h}
			}(i)
			if !eventually(2*time.Second, func() bool {
				w, _ := locks.Waiters(bg(), k)
				return len(w) == i+1
			}) {
				t.Fatalf("waiter %d did not block in the server", i)
			}
		}
		released := time.Now()
		if _, err := holder.Release(bg()); err != nil {
			t.Fatal(err)
		}
		for want := 0; want < 3; want++ {
			g := <-grants
			if g.i != want {
				t.Fatalf("waiter %d served before %d", g.i, want)
			}
			if d := g.at.Sub(released); d > 50*time.Millisecond {
				t.Fatalf("granted %v after the release", d)
			}
			released = time.Now()
			if _, err := g.h.Release(bg()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestC03_AWaitThatEnds(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		locks := newLocks(t, s.client(t))
		k := key(t, "busy")
		holder, err := locks.Lock(k).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Release(bg())
		start := time.Now()
		h, err := locks.Lock(k, rlock.Wait(200*time.Millisecond)).Acquire(bg())
		if h != nil || !errors.Is(err, rlock.ErrNotAcquired) {
			t.Fatalf("got %v, %v", h, err)
		}
		if d := time.Since(start); d < 190*time.Millisecond || d > 2*time.Second {
			t.Fatalf("the wait took %v", d)
		}
		ran := false
		err = locks.Lock(k, rlock.Wait(100*time.Millisecond)).Do(bg(), func(context.Context, *rlock.Hold) error {
			ran = true
			return nil
		})
		if ran || !errors.Is(err, rlock.ErrNotAcquired) {
			t.Fatalf("scoped form: ran %v, %v", ran, err)
		}
	})
}

func TestC04_Renewal(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		lease := 600 * time.Millisecond
		locks := newLocks(t, c, rlock.WithWatchdogLease(lease))
		k := key(t, "renewed")
		h, err := locks.Lock(k, rlock.Fenced()).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		_, before := rlock.WatchdogCounts(locks)
		time.Sleep(3 * lease)
		_, after := rlock.WatchdogCounts(locks)
		if h.Err() != nil {
			t.Fatal(h.Err())
		}
		info, err := locks.Info(bg(), k)
		if err != nil || info.Holders[h.Owner()] != 1 || info.Token != h.Token() {
			t.Fatalf("after 3 leases: %+v %v", info, err)
		}
		ran := after - before
		if ran < 3 || ran > 10 {
			t.Fatalf("%d renewals in 3 leases, want 3 to 10 (one per lease/3)", ran)
		}
		if _, err := h.Release(bg()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestC05_LossIsTold(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		lease := 900 * time.Millisecond
		for _, events := range []string{"", "Kd", "Ed"} {
			if err := c.ConfigSet(bg(), "notify-keyspace-events", events).Err(); err != nil {
				t.Fatal(err)
			}
			locks := newLocks(t, c, rlock.WithWatchdogLease(lease))
			k := key(t, "lost"+events)
			h, err := locks.Lock(k).Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			if events != "" {
				// Let the listener subscribe the held key.
				time.Sleep(300 * time.Millisecond)
			}
			forced := time.Now()
			if err := c.Do(bg(), "RLOCK.FORCERELEASE", k).Err(); err != nil {
				t.Fatal(err)
			}
			limit := lease / 3
			if events != "" {
				limit = 100 * time.Millisecond
			}
			select {
			case <-h.Lost():
			case <-time.After(2 * lease):
				t.Fatalf("events %q: the loss was not told", events)
			}
			// The slack is the node client's: scheduling on a loaded machine under -race.
			slack := 50 * time.Millisecond
			if events != "" {
				slack = 20 * time.Millisecond
			}
			if d := time.Since(forced); d > limit+slack {
				t.Fatalf("events %q: told %v after the force release, want within %v", events, d, limit)
			}
			if !errors.Is(h.Err(), rlock.ErrLost) || !errors.Is(context.Cause(h.Context()), rlock.ErrLost) {
				t.Fatalf("%v / %v", h.Err(), context.Cause(h.Context()))
			}
			if _, err := h.Release(bg()); !errors.Is(err, rlock.ErrLost) {
				t.Fatalf("release of a lost hold: %v", err)
			}
		}
		_ = c.ConfigSet(bg(), "notify-keyspace-events", "").Err()
	})
}

func TestC06_CancelledWaitsLeaveNothing(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		locks := newLocks(t, c)
		k := key(t, "c")
		counter := func(name string) int64 {
			st, err := locks.Stats(bg())
			if err != nil {
				t.Fatal(err)
			}
			n, _ := st[0].Number(name)
			return n
		}
		cancels0, handoffs0 := counter("wait_cancels"), counter("handoffs")
		var wg sync.WaitGroup
		var mu sync.Mutex
		granted, cancelled := 0, 0
		for i := 0; i < 40; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r := rand.New(rand.NewSource(int64(i)))
				time.Sleep(time.Duration(r.Intn(20)) * time.Millisecond)
				ctx, cancel := context.WithTimeout(bg(), time.Duration(1+r.Intn(30))*time.Millisecond)
				defer cancel()
				var opts []rlock.Option
				opts = append(opts, rlock.WaitForever())
				if i%4 == 1 {
					opts = append(opts, rlock.Session())
				}
				if i%4 == 2 {
					opts = append(opts, rlock.Fenced())
				}
				h, err := locks.Lock(k, opts...).Acquire(ctx)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					granted++
					time.Sleep(time.Duration(r.Intn(3)) * time.Millisecond)
					if _, err := h.Release(bg()); err != nil {
						t.Error(err)
					}
					return
				}
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, rlock.ErrNotAcquired) {
					t.Error(err)
				}
				cancelled++
			}(i)
		}
		wg.Wait()
		t.Logf("%d granted, %d cancelled", granted, cancelled)
		// Waits were cancelled in the server while grants went round.
		if cancelled == 0 || counter("wait_cancels") == cancels0 || counter("handoffs") == handoffs0 {
			t.Fatalf("cancelled %d; server: %d cancels, %d hand-offs", cancelled, counter("wait_cancels")-cancels0, counter("handoffs")-handoffs0)
		}
		if !eventually(2*time.Second, func() bool {
			n, _ := c.Exists(bg(), k).Result()
			w, _ := locks.Waiters(bg(), k)
			return n == 0 && len(w) == 0
		}) {
			info, _ := locks.Info(bg(), k)
			t.Fatalf("an orphaned hold: %+v", info)
		}
		// The same for the families that wait: permits and multi-key locks.
		tag := "{" + k + "}"
		sem := locks.Semaphore(tag+"sem", rlock.WaitForever())
		if _, err := sem.TrySetPermits(bg(), 1); err != nil {
			t.Fatal(err)
		}
		multi := []string{tag + "m1", tag + "m2"}
		cancelledRace(t, 20, func(ctx context.Context, i int) error {
			if i%2 == 0 {
				p, err := sem.Acquire(ctx, 1)
				if err == nil {
					_, err = p.Release(bg())
				}
				return err
			}
			h, err := locks.MultiLock(multi, rlock.WaitForever()).Acquire(ctx)
			if err == nil {
				_, err = h.Release(bg())
			}
			return err
		})
		if !eventually(2*time.Second, func() bool {
			n, _ := sem.Available(bg())
			e, _ := c.Exists(bg(), multi...).Result()
			return n == 1 && e == 0
		}) {
			n, _ := sem.Available(bg())
			t.Fatalf("permits %d of 1 after cancelled waits, or a multi-key lock left", n)
		}
	})
}

// cancelledRace runs n calls at once, each with a context that ends 1 to 30 ms after it
// starts; a call's error must be a cancellation.
func cancelledRace(t *testing.T, n int, call func(ctx context.Context, i int) error) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(i)))
			ctx, cancel := context.WithTimeout(bg(), time.Duration(1+r.Intn(30))*time.Millisecond)
			defer cancel()
			if err := call(ctx, i); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
}

func TestC07_LongWaitOutlivesSocketTimeouts(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t, func(o *redis.Options) { o.ReadTimeout = time.Second; o.WriteTimeout = time.Second })
		locks := newLocks(t, c, rlock.WithResponseTimeout(time.Second))
		k := key(t, "long")
		holder, err := locks.Lock(k).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(2500 * time.Millisecond)
			_, _ = holder.Release(bg())
		}()
		waiter := locks.Lock(k, rlock.Wait(5*time.Second))
		h, err := waiter.Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		if h.Count() != 1 || hcount(t, c, k, waiter.OwnerID()) != 1 {
			t.Fatalf("count %d", h.Count())
		}
		if _, err := h.Release(bg()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestC08_NoDoubleEffectOnRetry(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		p := startProxy(t, s.addr())
		locks := newLocks(t, redis.NewClient(&redis.Options{Addr: p.addr()}), rlock.WithSyncReplicas(0, 0))
		k := key(t, "retry")
		lock := locks.Lock(k)
		// The acquire reaches the server; its reply is cut off.
		p.cutNextReply()
		h, err := lock.Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		acquires := p.sent("RLOCK.ACQUIRE")
		if len(acquires) != 2 || reqID(acquires[0]) == "" || reqID(acquires[0]) != reqID(acquires[1]) {
			t.Fatalf("want the acquire sent twice with one REQ id (no resend by the driver): %q", acquires)
		}
		if h.Count() != 1 || hcount(t, c, k, lock.OwnerID()) != 1 {
			t.Fatalf("hold count %d after a resent acquire", hcount(t, c, k, lock.OwnerID()))
		}
		h2, err := lock.Acquire(bg())
		if err != nil || h2.Count() != 2 {
			t.Fatal(err)
		}
		p.cutNextReply()
		if free, err := h2.Release(bg()); err != nil || free {
			t.Fatalf("release: %v %v", free, err)
		}
		releases := p.sent("RLOCK.RELEASE")
		if len(releases) != 2 || reqID(releases[0]) != reqID(releases[1]) {
			t.Fatalf("want the release sent twice with one REQ id: %q", releases)
		}
		if n := hcount(t, c, k, lock.OwnerID()); n != 1 {
			t.Fatalf("hold count %d after a resent release, want 1", n)
		}
		// A blocked acquire whose connection is cut (CLIENT KILL) is sent again with its REQ
		// id on a new connection, and granted once.
		waiter := locks.Lock(k, rlock.Wait(5*time.Second))
		got := make(chan *rlock.Hold, 1)
		go func() {
			h, err := waiter.Acquire(bg())
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		var blocked []rlock.Waiter
		eventually(2*time.Second, func() bool { blocked, _ = locks.Waiters(bg(), k); return len(blocked) == 1 })
		if len(blocked) != 1 {
			t.Fatal("the waiter did not block")
		}
		if err := c.ClientKillByFilter(bg(), "ID", fmt.Sprint(blocked[0].ClientID)).Err(); err != nil {
			t.Fatal(err)
		}
		if !eventually(2*time.Second, func() bool {
			w, _ := locks.Waiters(bg(), k)
			return len(w) == 1 && w[0].ClientID != blocked[0].ClientID
		}) {
			t.Fatal("the waiter was not sent again")
		}
		if _, err := h.Release(bg()); err != nil {
			t.Fatal(err)
		}
		wh := <-got
		if wh == nil || wh.Count() != 1 || hcount(t, c, k, waiter.OwnerID()) != 1 {
			t.Fatalf("the resent wait: %v", wh)
		}
		acquires = p.sent("RLOCK.ACQUIRE")
		last := acquires[len(acquires)-2:]
		if reqID(last[0]) != reqID(last[1]) {
			t.Fatalf("the resent wait changed its REQ id: %q", last)
		}
		_, _ = wh.Release(bg())
	})
}

// reqID is the REQ id of a command as the proxy saw it (RESP), "" without one.
func reqID(cmd string) string {
	parts := strings.Split(cmd, "\r\n")
	for i, p := range parts {
		if strings.EqualFold(p, "REQ") && i+2 < len(parts) {
			return parts[i+2]
		}
	}
	return ""
}

func TestC17_BadInput(t *testing.T) {
	// Nothing listens here: a call that sent anything would fail with a connection error.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	locks := newLocks(t, dead)
	cases := map[string]*rlock.Lock{
		"empty name":     locks.Lock(""),
		"zero lease":     locks.Lock("k", rlock.Lease(0)),
		"negative lease": locks.Lock("k", rlock.Lease(-time.Second)),
		"negative wait":  locks.Lock("k", rlock.Wait(-time.Millisecond)),
		"empty owner":    locks.Lock("k", rlock.Owner("")),
		"long owner":     locks.Lock("k", rlock.Owner(strings.Repeat("o", 1025))),
		"negative sync":  locks.Lock("k", rlock.SyncReplicas(-1)),
	}
	for name, lock := range cases {
		if _, err := lock.Acquire(bg()); !errors.Is(err, rlock.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := locks.Semaphore("s").Acquire(bg(), 0); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("zero permits: %v", err)
	}
	if _, err := locks.Semaphore("").Available(bg()); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("empty semaphore name: %v", err)
	}
	if _, err := locks.PermitExpirableSemaphore("p", rlock.Lease(0)).Acquire(bg()); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("zero permit lease: %v", err)
	}
	// A name given twice counts once (clients/spec: multi-acquire-sorted-once-each); none, or
	// an empty one, is refused.
	for _, names := range [][]string{nil, {"a", ""}} {
		if _, err := locks.MultiLock(names).Acquire(bg()); !errors.Is(err, rlock.ErrInvalidArgument) {
			t.Errorf("multi-key names %q: %v", names, err)
		}
	}
	if _, err := locks.CountDownLatch("l").TrySetCount(bg(), 0); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("zero count: %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := locks.Lock("k").Acquire(nil); !errors.Is(err, rlock.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("nil context: %v", err)
	}
	if _, err := rlock.New(nil).Lock("k").Acquire(bg()); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("nil client: %v", err)
	}
	var nilClient *redis.Client
	if _, err := rlock.New(nilClient).Lock("k").Acquire(bg()); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("typed nil client: %v", err)
	}
	if err := locks.Lock("k", rlock.Wait(time.Second)).Do(bg(), nil); !errors.Is(err, rlock.ErrInvalidArgument) {
		t.Errorf("nil function: %v", err)
	}
	_ = fmt.Sprint()
}
