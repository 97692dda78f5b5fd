package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	locks := rlock.New(rdb)
	defer locks.Close()

	hold, err := locks.Lock("orders", rlock.Wait(5*time.Second), rlock.Fenced()).Acquire(ctx)
	if errors.Is(err, rlock.ErrNotAcquired) {
		fmt.Println("busy")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer hold.Release(ctx)
	// Work under the lock stops with hold.Context() if the hold is lost.
	fmt.Println("token", hold.Token())
}

func ExampleLock_Do() {
	ctx := context.Background()
	locks := rlock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	defer locks.Close()
	// Waits until granted (the handle sets no wait), runs the function, releases.
	err := locks.Lock("report").Do(ctx, func(ctx context.Context, h *rlock.Hold) error {
		return nil // ctx is cancelled if the hold is lost
	})
	_ = err
}

func ExampleLocks_Owner() {
	ctx := context.Background()
	locks := rlock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	defer locks.Close()
	// One owner id across handles: the second acquire re-enters; crossing another scope's
	// locks gets a *rlock.DeadlockError instead of waiting forever.
	job := locks.Owner()
	outer, _ := job.Lock("stock").Acquire(ctx)
	inner, _ := job.Lock("stock").Acquire(ctx)
	_, _ = inner.Release(ctx)
	_, _ = outer.Release(ctx)
	var dl *rlock.DeadlockError
	_, err := job.Lock("payment", rlock.WaitForever()).Acquire(ctx)
	if errors.As(err, &dl) {
		fmt.Println(dl.Cycle)
	}
}

func ExampleElection() {
	ctx := context.Background()
	locks := rlock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	defer locks.Close()
	election := locks.Election("scheduler")
	leadership, err := election.Campaign(ctx, "node-a:8080") // waits until elected
	if err != nil {
		return
	}
	fmt.Println("term", leadership.Term())
	_ = leadership.Resign(ctx)
}

func ExampleHold_Guard() {
	ctx := context.Background()
	locks := rlock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}))
	defer locks.Close()
	hold, err := locks.Lock("orders", rlock.Fenced()).Acquire(ctx)
	if err != nil {
		return
	}
	defer hold.Release(ctx)
	// The SET runs only while this hold stands, checked by the server in the same turn: a
	// holder that paused past its lease is refused, and its write never lands.
	err = hold.Guard(ctx, "HSET", "order:{orders}:1", "state", "paid").Err()
	if errors.Is(err, rlock.ErrNotHeld) { // also rlock.ErrStaleToken: the lock was taken again
		fmt.Println("no longer the holder: nothing was written")
	}
}
