package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

// TestHelperSessionHolder is not a test: C09 runs the test binary as a separate process
// that takes a SESSION hold and waits to be killed.
func TestHelperSessionHolder(t *testing.T) {
	addr, name := os.Getenv("RLOCK_HELPER_ADDR"), os.Getenv("RLOCK_HELPER_KEY")
	if addr == "" {
		t.Skip("helper process only")
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	locks := rlock.New(c)
	for _, opts := range [][]rlock.Option{{rlock.Session(), rlock.Wait(time.Second)}, {rlock.Session()}} {
		if _, err := locks.Lock(name, opts...).Acquire(bg()); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		name += ":once"
	}
	fmt.Println("held")
	time.Sleep(time.Minute)
}

func TestC09_SessionHolds(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		k := key(t, "session")
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSessionHolder$")
		cmd.Env = append(os.Environ(), "RLOCK_HELPER_ADDR="+s.addr(), "RLOCK_HELPER_KEY="+k)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, _ := out.Read(buf)
		if !strings.Contains(string(buf[:n]), "held") {
			_ = cmd.Process.Kill()
			t.Fatalf("the holder said %q", buf[:n])
		}
		if e, _ := c.Exists(bg(), k, k+":once").Result(); e != 2 {
			t.Fatal("not held")
		}
		killed := time.Now()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !eventually(time.Second, func() bool { e, _ := c.Exists(bg(), k, k+":once").Result(); return e == 0 }) {
			t.Fatal("the session hold outlived its process")
		}
		if d := time.Since(killed); d > 500*time.Millisecond {
			t.Fatalf("freed %v after the kill", d)
		}
	})
}

func TestC10_Fencing(t *testing.T) {
	for _, flavor := range flavors(t) {
		t.Run(flavor, func(t *testing.T) {
			s := startServer(t, flavor, serverOpts{aof: true, config: []string{"appendfsync", "always"}})
			k := "fenced"
			var last int64
			take := func() {
				locks := rlock.New(s.client(t))
				defer locks.Close()
				h, err := locks.Lock(k, rlock.Fenced()).Acquire(bg())
				if err != nil {
					t.Fatal(err)
				}
				if h.Token() <= last {
					t.Fatalf("token %d after %d", h.Token(), last)
				}
				last = h.Token()
				if _, err := h.Release(bg()); err != nil {
					t.Fatal(err)
				}
			}
			take()
			take()
			s.restart(t)
			take()
			if last != 3 {
				t.Fatalf("last token %d, want 3", last)
			}
		})
	}
}

func TestC11_Deadlock(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		locks := newLocks(t, s.client(t))
		k1, k2 := key(t, "k1"), key(t, "k2")
		a, b := locks.Owner(), locks.Owner()
		ha, err := a.Lock(k1).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		hb, err := b.Lock(k2).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			h, err := a.Lock(k2, rlock.Wait(10*time.Second)).Acquire(bg())
			if err == nil {
				_, _ = h.Release(bg())
			}
			got <- err
		}()
		eventually(2*time.Second, func() bool { w, _ := locks.Waiters(bg(), k2); return len(w) == 1 })
		_, err = b.Lock(k1, rlock.Wait(5*time.Second)).Acquire(bg())
		var dl *rlock.DeadlockError
		if !errors.As(err, &dl) {
			t.Fatalf("want a deadlock, got %v", err)
		}
		names := map[string]bool{}
		for _, w := range dl.Cycle {
			names[w.Owner], names[w.Key], names[w.Holder] = true, true, true
		}
		for _, want := range []string{a.ID(), b.ID(), k1, k2} {
			if !names[want] {
				t.Fatalf("the cycle %+v does not name %q", dl.Cycle, want)
			}
		}
		_, _ = hb.Release(bg())
		if err := <-got; err != nil {
			t.Fatalf("the other waiter: %v", err)
		}
		_, _ = ha.Release(bg())
	})
}

func TestC12_OtherSynchronizers(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) { otherSynchronizers(t, newLocks(t, s.client(t)), "{"+key(t, "")+"}") })
}

func otherSynchronizers(t *testing.T, locks *rlock.Locks, tag string) {
	ctx := bg()
	// Read-write: readers share, the writer is alone.
	doc := tag + "doc"
	r1, err := locks.RWLock(doc).Read().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := locks.RWLock(doc).Read().Acquire(ctx)
	if err != nil {
		t.Fatal("readers must share:", err)
	}
	w := locks.RWLock(doc)
	if _, err := w.Write().Acquire(ctx); !errors.Is(err, rlock.ErrNotAcquired) {
		t.Fatalf("a writer beside readers: %v", err)
	}
	_, _ = r1.Release(ctx)
	_, _ = r2.Release(ctx)
	wh, err := w.Write().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locks.RWLock(doc).Read().Acquire(ctx); !errors.Is(err, rlock.ErrNotAcquired) {
		t.Fatalf("a reader beside the writer: %v", err)
	}
	_, _ = wh.Release(ctx)

	// Multi-key: all or none.
	a, b, c := tag+"a", tag+"b", tag+"c"
	other, err := locks.Lock(b).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locks.MultiLock([]string{a, b}).Acquire(ctx); !errors.Is(err, rlock.ErrNotAcquired) {
		t.Fatalf("multi-key over a held lock: %v", err)
	}
	if info, _ := locks.Info(ctx, a); len(info.Holders) != 0 {
		t.Fatal("a multi-key acquire that failed took a lock")
	}
	_, _ = other.Release(ctx)
	mh, err := locks.MultiLock([]string{a, b, c}, rlock.Wait(time.Second)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := mh.Release(ctx); err != nil || n != 3 {
		t.Fatalf("multi release: %d %v", n, err)
	}

	// Semaphore: never above N.
	sem := locks.Semaphore(tag+"pool", rlock.Wait(2*time.Second))
	if ok, err := sem.TrySetPermits(ctx, 2); err != nil || !ok {
		t.Fatal(ok, err)
	}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sem.Acquire(ctx, 1)
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			inside.Add(-1)
			_, _ = p.Release(ctx)
		}()
	}
	wg.Wait()
	if most.Load() > 2 || most.Load() < 1 {
		t.Fatalf("%d inside a semaphore of 2", most.Load())
	}

	// Permit lease expires.
	pes := locks.PermitExpirableSemaphore(tag+"slots", rlock.Lease(200*time.Millisecond))
	if _, err := pes.TrySetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p, err := pes.Acquire(ctx)
	if err != nil || len(p.ID()) != 32 {
		t.Fatal(p, err)
	}
	if _, err := pes.Acquire(ctx); !errors.Is(err, rlock.ErrNotAcquired) {
		t.Fatalf("a second permit of one: %v", err)
	}
	p2, err := locks.PermitExpirableSemaphore(tag+"slots", rlock.Lease(time.Second), rlock.Wait(2*time.Second)).Acquire(ctx)
	if err != nil {
		t.Fatalf("the lease did not expire: %v", err)
	}
	select {
	case <-p.Lost():
	case <-time.After(time.Second):
		t.Fatal("the expired permit was not told lost")
	}
	_, _ = p2.Release(ctx)

	// Latch opens at zero.
	latch := locks.CountDownLatch(tag+"batch", rlock.Wait(3*time.Second))
	if ok, err := latch.TrySetCount(ctx, 2); err != nil || !ok {
		t.Fatal(ok, err)
	}
	opened := make(chan error, 1)
	go func() { opened <- latch.AwaitZero(ctx) }()
	time.Sleep(50 * time.Millisecond)
	_, _ = latch.CountDown(ctx)
	select {
	case err := <-opened:
		t.Fatalf("opened at 1: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	_, _ = latch.CountDown(ctx)
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
}

func TestC13_Election(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		locks := newLocks(t, s.client(t))
		e := locks.Election(key(t, "leader"))
		ctx, cancel := context.WithCancel(bg())
		defer cancel()
		changes, err := e.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if first := <-changes; first.Value != "" {
			t.Fatalf("a leader before any campaign: %+v", first)
		}
		won := make(chan *rlock.Leadership, 4)
		for i := 0; i < 4; i++ {
			v := fmt.Sprintf("node-%d", i)
			go func() {
				l, err := e.Campaign(ctx, v)
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				won <- l
			}()
			time.Sleep(60 * time.Millisecond) // arrival order, and one observed change each
		}
		var seen []rlock.Leader
		for i := 0; i < 4; i++ {
			l := <-won
			select {
			case w := <-won:
				t.Fatalf("two leaders: %s and %s", l.Value(), w.Value())
			case <-time.After(100 * time.Millisecond):
			}
			cur, ok, _ := e.Leader(bg())
			if !ok || cur.Value != l.Value() || cur.Term != l.Term() {
				t.Fatalf("leader %+v, want %s term %d", cur, l.Value(), l.Term())
			}
			seen = append(seen, rlock.Leader{Value: l.Value(), Term: l.Term()})
			if err := l.Resign(bg()); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range seen {
			got := <-changes
			// Without the module's events the observer listens on the unlock channel, and
			// the module then leaves a freed lock free for 5 ms once per round of hand-offs:
			// a zero Leader (nobody led) may show between two leaders, as in the Rust
			// client's test. Every leader must show, once, in order.
			if got == (rlock.Leader{}) && i > 0 {
				got = <-changes
			}
			if got != want {
				t.Fatalf("change %d observed %+v, want %+v", i, got, want)
			}
			if i > 0 && got.Term <= seen[i-1].Term {
				t.Fatal("terms must increase")
			}
		}
		if last := <-changes; last.Value != "" {
			t.Fatalf("after the last resign: %+v", last)
		}
	})
}

// Observe follows the module's keyspace events when the server publishes them, as the Rust
// client does: it reads the lock on an event (an acquire, a force release) and at the
// holder's lease end, and otherwise about once a second, not every 50 ms.
func TestObserveFollowsTheModulesEvents(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		was, err := c.ConfigGet(bg(), "notify-keyspace-events").Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.ConfigSet(bg(), "notify-keyspace-events", was["notify-keyspace-events"]).Err() })
		if err := c.ConfigSet(bg(), "notify-keyspace-events", "Kd").Err(); err != nil {
			t.Fatal(err)
		}
		locks := newLocks(t, s.client(t))
		k := key(t, "leader")
		ctx, cancel := context.WithCancel(bg())
		defer cancel()
		changes, err := locks.Election(k).Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next := func(within time.Duration) (rlock.Leader, time.Duration) {
			t.Helper()
			start := time.Now()
			select {
			case l := <-changes:
				return l, time.Since(start)
			case <-time.After(within):
				t.Fatalf("no change within %v", within)
			}
			return rlock.Leader{}, 0
		}
		if first, _ := next(2 * time.Second); first != (rlock.Leader{}) {
			t.Fatalf("a leader before any campaign: %+v", first)
		}
		// Nothing changes: it reads about once a second (polling would read 12 times).
		reads := commandCalls(t, c, "rlock.info")
		time.Sleep(600 * time.Millisecond)
		if n := commandCalls(t, c, "rlock.info") - reads; n > 2 {
			t.Fatalf("%d reads in 600 ms while nothing changed: it polls", n)
		}
		// An acquire is an event: seen at once.
		h, err := locks.Lock(k, rlock.Owner("node-a"), rlock.Fenced(), rlock.Lease(400*time.Millisecond)).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		if got, d := next(time.Second); got != (rlock.Leader{Value: "node-a", Term: h.Token()}) || d > 300*time.Millisecond {
			t.Fatalf("after the acquire: %+v after %v", got, d)
		}
		// Its lease runs out unrenewed (no event): seen at the lease's end, not a second later.
		if got, d := next(2 * time.Second); got != (rlock.Leader{}) || d > 700*time.Millisecond {
			t.Fatalf("after the lease ran out: %+v after %v", got, d)
		}
		// A force release is an event.
		b, err := locks.Lock(k, rlock.Owner("node-b"), rlock.Fenced()).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := next(time.Second); got.Value != "node-b" || got.Term != b.Token() {
			t.Fatalf("after node-b's acquire: %+v", got)
		}
		if _, err := locks.ForceRelease(bg(), k); err != nil {
			t.Fatal(err)
		}
		if got, d := next(time.Second); got != (rlock.Leader{}) || d > 300*time.Millisecond {
			t.Fatalf("after the force release: %+v after %v", got, d)
		}
	})
}

func TestC15_DurableByDefault(t *testing.T) {
	for _, flavor := range flavors(t) {
		t.Run(flavor, func(t *testing.T) {
			p := startServer(t, flavor, serverOpts{})
			r := startServer(t, flavor, serverOpts{replicaOf: p.port})
			c := p.client(t)
			if !eventually(10*time.Second, func() bool {
				info, _ := c.Info(bg(), "replication").Result()
				return strings.Contains(info, "state=online")
			}) {
				t.Fatal("the replica did not come online")
			}
			waits := func() int64 {
				info, _ := c.Info(bg(), "commandstats").Result()
				for _, l := range strings.Split(info, "\n") {
					if rest, ok := strings.CutPrefix(l, "cmdstat_wait:calls="); ok {
						var n int64
						fmt.Sscan(strings.Split(rest, ",")[0], &n)
						return n
					}
				}
				return 0
			}
			locks := newLocks(t, c)
			h, err := locks.Lock("durable").Acquire(bg())
			if err != nil {
				t.Fatalf("default acquire: %v", err)
			}
			if h.ReplicasAcked() < 1 {
				t.Fatalf("default acquire: acked %d", h.ReplicasAcked())
			}
			_, _ = h.Release(bg())
			before := waits()
			h, err = locks.Lock("durable", rlock.SyncReplicas(0)).Acquire(bg())
			if err != nil || h.ReplicasAcked() != 0 || waits() != before {
				t.Fatalf("SyncReplicas(0) sent WAIT: %v", err)
			}
			_, _ = h.Release(bg())
			// A replica that cannot acknowledge: the grant is released and refused.
			_ = r.cmd.Process.Signal(syscall.SIGSTOP)
			defer r.cmd.Process.Signal(syscall.SIGCONT)
			_, err = locks.Lock("durable", rlock.SyncReplicas(1), rlock.SyncTimeout(200*time.Millisecond)).Acquire(bg())
			if !errors.Is(err, rlock.ErrNotAcknowledged) {
				t.Fatalf("want NotAcknowledged, got %v", err)
			}
			if n, _ := c.Exists(bg(), "durable").Result(); n != 0 {
				t.Fatal("an unacknowledged grant was kept")
			}
		})
	}
}

func TestC16_OneWatchdog(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		lease := 900 * time.Millisecond
		locks := newLocks(t, s.client(t), rlock.WithWatchdogLease(lease))
		before := runtime.NumGoroutine()
		var holds []*rlock.Hold
		for i := 0; i < 1000; i++ {
			h, err := locks.Lock(fmt.Sprintf("%s:%d", key(t, "h"), i)).Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			holds = append(holds, h)
		}
		if g := runtime.NumGoroutine() - before; g > 5 {
			t.Fatalf("%d goroutines for 1000 holds", g)
		}
		ticks0, renewals0 := rlock.WatchdogCounts(locks)
		time.Sleep(lease)
		ticks, renewals := rlock.WatchdogCounts(locks)
		if renewals-renewals0 < 1000 {
			t.Fatalf("%d renewals in one lease for 1000 holds", renewals-renewals0)
		}
		if ticks-ticks0 > 40 {
			t.Fatalf("%d pipelines for %d renewals: not batched", ticks-ticks0, renewals-renewals0)
		}
		for _, h := range holds {
			if h.Err() != nil {
				t.Fatal(h.Err())
			}
			_, _ = h.Release(bg())
		}
	})
}

func TestC18_Owners(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		locks := newLocks(t, s.client(t))
		k1, k2 := key(t, "a"), key(t, "b")
		scope := locks.Owner()
		outer, err := scope.Lock(k1).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		inner, err := scope.Lock(k1, rlock.Wait(time.Second)).Acquire(bg())
		if err != nil || inner.Count() != 2 {
			t.Fatalf("nested scope re-entry: %v", err)
		}
		_, _ = inner.Release(bg())
		// Two scopes crossing two locks.
		other := locks.Owner()
		ho, err := other.Lock(k2).Acquire(bg())
		if err != nil {
			t.Fatal(err)
		}
		waiting := make(chan error, 1)
		go func() {
			h, err := scope.Lock(k2, rlock.WaitForever()).Acquire(bg())
			if err == nil {
				_, _ = h.Release(bg())
			}
			waiting <- err
		}()
		eventually(2*time.Second, func() bool { w, _ := locks.Waiters(bg(), k2); return len(w) == 1 })
		var dl *rlock.DeadlockError
		if _, err := other.Lock(k1, rlock.WaitForever()).Acquire(bg()); !errors.As(err, &dl) {
			t.Fatalf("crossing scopes: %v", err)
		}
		_, _ = ho.Release(bg())
		if err := <-waiting; err != nil {
			t.Fatal(err)
		}
		// A hold released from another goroutine is released.
		done := make(chan error)
		go func() { _, err := outer.Release(bg()); done <- err }()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n, _ := s.client(t).Exists(bg(), k1).Result(); n != 0 {
			t.Fatal("still held")
		}
	})
}

// Close ends the Session holds it still has at once (it closes their connections), as the
// Java client's close does; a leased hold is left to its lease, as every client's close
// leaves it (Release releases, Close does not).
func TestCloseEndsSessionHolds(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		locks := rlock.New(s.client(t))
		session, leased := key(t, "session"), key(t, "leased")
		if _, err := locks.Lock(session, rlock.Session()).Acquire(bg()); err != nil {
			t.Fatal(err)
		}
		if _, err := locks.Lock(leased, rlock.Lease(5*time.Second)).Acquire(bg()); err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Exists(bg(), session, leased).Result(); n != 2 {
			t.Fatalf("%d of the 2 locks held", n)
		}
		closed := time.Now()
		_ = locks.Close()
		if !eventually(time.Second, func() bool { n, _ := c.Exists(bg(), session).Result(); return n == 0 }) {
			t.Fatal("the session hold outlived Close")
		}
		if d := time.Since(closed); d > 500*time.Millisecond {
			t.Fatalf("freed %v after Close", d)
		}
		if n, _ := c.Exists(bg(), leased).Result(); n != 1 {
			t.Fatal("Close released a leased hold")
		}
	})
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	s := sharedServer(t, flavors(t)[0])
	c := s.client(t)
	_ = c.Ping(bg()).Err()
	before := runtime.NumGoroutine()
	_ = c.ConfigSet(bg(), "notify-keyspace-events", "Kd").Err()
	defer c.ConfigSet(bg(), "notify-keyspace-events", "")
	locks := rlock.New(c)
	k := key(t, "g")
	h, err := locks.Lock(k).Acquire(bg())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg(), 50*time.Millisecond)
	_, _ = locks.Lock(k, rlock.WaitForever()).Acquire(ctx)
	cancel()
	obs, _ := locks.Election(k).Observe(bg())
	<-obs
	time.Sleep(200 * time.Millisecond)
	_, _ = h.Release(bg())
	_ = locks.Close()
	if !eventually(3*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Close, %d before\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	}
	if _, err := locks.Lock(k).Acquire(bg()); !errors.Is(err, rlock.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestDeadServerFailsWithinWaitAndResponseTimeout(t *testing.T) {
	s := startServer(t, flavors(t)[0], serverOpts{})
	c := s.client(t)
	locks := newLocks(t, c, rlock.WithResponseTimeout(300*time.Millisecond))
	k := "held"
	h, err := locks.Lock(k).Acquire(bg())
	if err != nil {
		t.Fatal(err)
	}
	_ = h
	_ = s.cmd.Process.Signal(syscall.SIGSTOP) // a server that answers nothing
	defer s.cmd.Process.Signal(syscall.SIGCONT)
	start := time.Now()
	_, err = locks.Lock(k, rlock.Wait(400*time.Millisecond)).Acquire(bg())
	if err == nil {
		t.Fatal("acquired from a stopped server")
	}
	if d := time.Since(start); d > 400*time.Millisecond+2*300*time.Millisecond+300*time.Millisecond {
		t.Fatalf("failed after %v", d)
	}
	s.kill()
	start = time.Now()
	if _, err := locks.Lock(k, rlock.Wait(400*time.Millisecond)).Acquire(bg()); err == nil {
		t.Fatal("acquired from a dead server")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("failed after %v", d)
	}
}
