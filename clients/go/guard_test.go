package rlock_test

// C20 guarded writes: Hold.Guard sends RLOCK.GUARD. A write through a hold lands while the hold
// stands, and is refused, changing nothing, once the lease ran out (no renewal, or while the
// server slept), the lock was force-released, or a newer token exists. The module must have
// RLOCK.GUARD (RLOCK_MODULE).

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

// dataOf is the data a lock guards, in the lock's slot.
func dataOf(k string) string { return "{" + k + "}:data" }

// needGuard fails the test when the module has no RLOCK.GUARD.
func needGuard(t *testing.T, c *redis.Client) {
	t.Helper()
	info, err := c.Do(bg(), "COMMAND", "INFO", "RLOCK.GUARD").Slice()
	if err != nil || len(info) == 0 || info[0] == nil {
		t.Fatalf("the module has no RLOCK.GUARD (%v): set RLOCK_MODULE to a build with it", err)
	}
}

// guardCalls is how many RLOCK.GUARD calls the server has run.
func guardCalls(t *testing.T, c *redis.Client) int { return commandCalls(t, c, "rlock.guard") }

// commandCalls is how many calls of command (lower case) the server has run (INFO commandstats).
func commandCalls(t *testing.T, c *redis.Client, command string) int {
	info, err := c.Info(bg(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_"+command+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}

// lockState is the lock's hash and its data, to show that a refusal changed nothing.
func lockState(t *testing.T, c *redis.Client, k string) string {
	h, err := c.HGetAll(bg(), k).Result()
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Get(bg(), dataOf(k)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return fmt.Sprintf("%v %q", h, d)
}

// refusedNotHeld checks err is a NOTHELD refusal of the hold, not a stale token.
func refusedNotHeld(t *testing.T, err error, h *rlock.Hold) {
	t.Helper()
	var nh *rlock.NotHeldError
	if !errors.As(err, &nh) || errors.Is(err, rlock.ErrStaleToken) || nh.Key != h.Name() || nh.Owner != h.Owner() {
		t.Fatalf("want a NotHeldError for %q / %q, got %v", h.Name(), h.Owner(), err)
	}
}

// holdWriting acquires lock k through locks with opts and writes value to its data through the
// hold (RLOCK.GUARD); either failing fails the test.
func holdWriting(t *testing.T, locks *rlock.Locks, k, value string, opts ...rlock.Option) *rlock.Hold {
	t.Helper()
	h, err := locks.Lock(k, opts...).Acquire(bg())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Guard(bg(), "SET", dataOf(k), value).Err(); err != nil {
		t.Fatal(err)
	}
	return h
}

// released releases h, failing the test if that fails.
func released(t *testing.T, h *rlock.Hold) {
	t.Helper()
	if _, err := h.Release(bg()); err != nil {
		t.Fatal(err)
	}
}

// dataIs fails the test unless the data of lock k reads want.
func dataIs(t *testing.T, c *redis.Client, k, want string) {
	t.Helper()
	if v, _ := c.Get(bg(), dataOf(k)).Result(); v != want {
		t.Fatalf("the data is %q, want %q", v, want)
	}
}

func TestC20_GuardedWrites(t *testing.T) {
	onEachServer(t, func(t *testing.T, s *server) {
		c := s.client(t)
		needGuard(t, c)
		locks := newLocks(t, c)

		t.Run("applied while the hold stands", func(t *testing.T) {
			k := key(t, "lock")
			h, err := locks.Lock(k).Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			cmd := h.Guard(bg(), "SET", dataOf(k), "v1")
			if v, err := cmd.Text(); err != nil || v != "OK" {
				t.Fatalf("SET through the hold: %q %v", v, err)
			}
			if want := []any{"RLOCK.GUARD", k, h.Owner(), "CALL", "SET", dataOf(k), "v1"}; !reflect.DeepEqual(cmd.Args(), want) {
				t.Fatalf("sent %v, want %v", cmd.Args(), want)
			}
			dataIs(t, c, k, "v1")
			if n, err := h.Guard(bg(), "APPEND", dataOf(k), "+2").Int64(); err != nil || n != 4 {
				t.Fatalf("an integer reply: %d %v", n, err)
			}
			if v, err := h.Guard(bg(), "GET", dataOf(k)).Text(); err != nil || v != "v1+2" {
				t.Fatalf("GET through the hold: %q %v", v, err)
			}
			if err := h.Guard(bg(), "GET", dataOf(k)+":none").Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("a nil reply is redis.Nil: %v", err)
			}
			err = h.Guard(bg(), "INCR", dataOf(k)).Err()
			var re redis.Error
			if !errors.As(err, &re) || errors.Is(err, rlock.ErrNotHeld) || !strings.HasPrefix(err.Error(), "ERR ") {
				t.Fatalf("the inner command's own error: %v", err)
			}
			released(t, h)

			fenced, err := locks.Lock(k, rlock.Fenced()).Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			cmd = fenced.Guard(bg(), "SET", dataOf(k), fmt.Sprint("t", fenced.Token()))
			if want := []any{"RLOCK.GUARD", k, fenced.Owner(), "TOKEN", fenced.Token(), "CALL", "SET", dataOf(k), fmt.Sprint("t", fenced.Token())}; !reflect.DeepEqual(cmd.Args(), want) || cmd.Err() != nil {
				t.Fatalf("sent %v (%v), want %v", cmd.Args(), cmd.Err(), want)
			}
			dataIs(t, c, k, fmt.Sprint("t", fenced.Token()))
			released(t, fenced)

			rw := locks.RWLock(k + ":rw")
			w, err := rw.Write(rlock.Fenced()).Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			cmd = w.Guard(bg(), "SET", dataOf(k+":rw"), "w")
			if cmd.Err() != nil || cmd.Args()[3] != "WRITE" || cmd.Args()[4] != "TOKEN" {
				t.Fatalf("a write hold: %v %v", cmd.Args(), cmd.Err())
			}
			released(t, w)
			r, err := rw.Read().Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			cmd = r.Guard(bg(), "GET", dataOf(k+":rw"))
			if v, err := cmd.Text(); err != nil || v != "w" || cmd.Args()[3] != "READ" {
				t.Fatalf("a read hold: %v %q %v", cmd.Args(), v, err)
			}
			released(t, r)
		})

		t.Run("refused once the lease ran out", func(t *testing.T) {
			k := key(t, "lock")
			h := holdWriting(t, locks, k, "before", rlock.Lease(300*time.Millisecond)) // not renewed
			time.Sleep(450 * time.Millisecond)
			before := lockState(t, c, k)
			refusedNotHeld(t, h.Guard(bg(), "SET", dataOf(k), "after").Err(), h)
			if after := lockState(t, c, k); after != before || !strings.HasSuffix(before, `"before"`) {
				t.Fatalf("the refusal changed %s into %s", before, after)
			}
		})

		t.Run("refused once the lease ran out while the server slept", func(t *testing.T) {
			k := key(t, "lock")
			h := holdWriting(t, locks, k, "before", rlock.Lease(200*time.Millisecond), rlock.Fenced())
			admin := s.client(t)
			slept := make(chan error, 1)
			go func() { slept <- admin.Do(context.Background(), "DEBUG", "SLEEP", "0.4").Err() }()
			time.Sleep(50 * time.Millisecond) // DEBUG SLEEP runs: the guard waits behind it
			refused := h.Guard(bg(), "SET", dataOf(k), "after").Err()
			if err := <-slept; err != nil {
				t.Fatal(err)
			}
			refusedNotHeld(t, refused, h)
			dataIs(t, c, k, "before")
		})

		t.Run("refused once the lock was force-released", func(t *testing.T) {
			k := key(t, "lock")
			h := holdWriting(t, locks, k, "before", rlock.Fenced())
			if n, err := c.Do(bg(), "RLOCK.FORCERELEASE", k).Int64(); err != nil || n != 1 {
				t.Fatalf("force release: %d %v", n, err)
			}
			refusedNotHeld(t, h.Guard(bg(), "SET", dataOf(k), "after").Err(), h)
			if st := lockState(t, c, k); st != `map[] "before"` {
				t.Fatalf("the refusal changed something: %s", st)
			}
		})

		t.Run("refused once a newer token exists", func(t *testing.T) {
			k := key(t, "lock")
			first := holdWriting(t, locks, k, "first", rlock.Fenced())
			// Another holder takes the lock after a force release, and writes.
			if err := c.Do(bg(), "RLOCK.FORCERELEASE", k).Err(); err != nil {
				t.Fatal(err)
			}
			second := holdWriting(t, newLocks(t, c), k, "second", rlock.Fenced())
			if second.Token() <= first.Token() {
				t.Fatalf("second: tokens %d %d", first.Token(), second.Token())
			}
			before := lockState(t, c, k)
			refusedNotHeld(t, first.Guard(bg(), "SET", dataOf(k), "stale").Err(), first)
			if after := lockState(t, c, k); after != before || !strings.HasSuffix(before, `"second"`) {
				t.Fatalf("the refusal changed %s into %s", before, after)
			}
			released(t, second)
			// The same owner takes it again (a stable owner, in another process or after a
			// restart): it holds the lock, but not as the hold that got the old token.
			again, err := newLocks(t, c).Lock(k, rlock.Fenced(), rlock.Owner(first.Owner())).Acquire(bg())
			if err != nil || again.Token() <= second.Token() {
				t.Fatalf("again: %v, tokens %d %d", err, second.Token(), again.Token())
			}
			before = lockState(t, c, k)
			err = first.Guard(bg(), "SET", dataOf(k), "stale").Err()
			var st *rlock.StaleTokenError
			if !errors.As(err, &st) || !errors.Is(err, rlock.ErrStaleToken) || !errors.Is(err, rlock.ErrNotHeld) {
				t.Fatalf("want a StaleTokenError (also ErrNotHeld), got %v", err)
			}
			if *st != (rlock.StaleTokenError{Key: k, Owner: first.Owner(), Token: first.Token(), Current: again.Token()}) {
				t.Fatalf("%+v", *st)
			}
			if after := lockState(t, c, k); after != before {
				t.Fatalf("the refusal changed %s into %s", before, after)
			}
			if err := again.Guard(bg(), "SET", dataOf(k), "again").Err(); err != nil {
				t.Fatalf("the newer hold's own token: %v", err)
			}
			dataIs(t, c, k, "again")
			released(t, again)
		})

		t.Run("bad input and a released hold send nothing", func(t *testing.T) {
			k := key(t, "lock")
			h, err := locks.Lock(k).Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			sent := guardCalls(t, c)
			for i, args := range [][]any{nil, {""}, {42, dataOf(k)}, {nil}, {"SET", dataOf(k), nil}, {"SET", dataOf(k), []string{"v"}}, {"SET", dataOf(k), struct{}{}}} {
				if err := h.Guard(bg(), args...).Err(); !errors.Is(err, rlock.ErrInvalidArgument) {
					t.Errorf("bad command %d %#v: %v", i, args, err)
				}
			}
			released(t, h)
			if err := h.Guard(bg(), "SET", dataOf(k), "v").Err(); !errors.Is(err, rlock.ErrNotHeld) || !strings.Contains(err.Error(), "released") {
				t.Fatalf("a released hold: %v", err)
			}
			if n := guardCalls(t, c); n != sent {
				t.Fatalf("%d RLOCK.GUARD reached the server", n-sent)
			}
			if n, _ := c.Exists(bg(), dataOf(k)).Result(); n != 0 {
				t.Fatal("the data was written")
			}
		})

		t.Run("sent once, never again behind the caller's back", func(t *testing.T) {
			p := startProxy(t, s.addr())
			via := newLocks(t, redis.NewClient(&redis.Options{Addr: p.addr()}), rlock.WithSyncReplicas(0, 0))
			k := key(t, "lock")
			h, err := via.Lock(k).Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			p.cutNextReply() // the guard reaches the server and runs; its reply is lost
			if err := h.Guard(bg(), "INCR", dataOf(k)).Err(); err == nil || errors.Is(err, rlock.ErrNotHeld) {
				t.Fatalf("a reply lost with its connection: %v", err)
			}
			if n := len(p.sent("RLOCK.GUARD")); n != 1 {
				t.Fatalf("RLOCK.GUARD sent %d times", n)
			}
			dataIs(t, c, k, "1") // the guarded INCR ran once, not again behind the caller's back
			released(t, h)
		})

		t.Run("a leader writes only while it leads, in its term", func(t *testing.T) {
			k := key(t, "election")
			leader, err := locks.Election(k).Campaign(bg(), "node-a")
			if err != nil {
				t.Fatal(err)
			}
			cmd := leader.Guard(bg(), "SET", dataOf(k), "a")
			if want := []any{"RLOCK.GUARD", k, "node-a", "TOKEN", leader.Term(), "CALL", "SET", dataOf(k), "a"}; cmd.Err() != nil || !reflect.DeepEqual(cmd.Args(), want) {
				t.Fatalf("sent %v (%v), want %v", cmd.Args(), cmd.Err(), want)
			}
			if err := c.Do(bg(), "RLOCK.FORCERELEASE", k).Err(); err != nil {
				t.Fatal(err)
			}
			next, err := newLocks(t, c).Election(k).Campaign(bg(), "node-b")
			if err != nil || next.Term() <= leader.Term() {
				t.Fatalf("next: %v, terms %d %d", err, leader.Term(), next.Term())
			}
			if err := leader.Guard(bg(), "SET", dataOf(k), "a again").Err(); !errors.Is(err, rlock.ErrNotHeld) {
				t.Fatalf("a deposed leader wrote: %v", err)
			}
			dataIs(t, c, k, "a")
			if err := next.Resign(bg()); err != nil {
				t.Fatal(err)
			}
		})
	})
}
