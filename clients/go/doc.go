// Package rlock is the Go client of rlock, a Redis/Valkey module that moves Redisson's
// locks into the server (RLOCK.*, RSEM.*, RLATCH.* commands): locks that wait in the server
// in arrival order, fencing tokens, SESSION holds, deadlock detection, read-write locks,
// multi-key locks, semaphores, latches and leader election, on go-redis v9.
//
//	locks := rlock.New(rdb) // *redis.Client, *redis.ClusterClient, redis.UniversalClient
//	defer locks.Close()
//	hold, err := locks.Lock("orders", rlock.Wait(5*time.Second), rlock.Fenced()).Acquire(ctx)
//	if err != nil {
//		return err // errors.Is(err, rlock.ErrNotAcquired) when the wait ended
//	}
//	defer hold.Release(ctx)
//	doWork(hold.Context(), hold.Token()) // hold.Context() is cancelled if the hold is lost
//
// A context ends any wait, and a wait given up leaves nothing held: the server forgets the
// waiter, and a grant that raced the cancellation is found by its REQ id and released
// before Acquire returns. Nothing is sent twice behind the caller's back: Locks talks over
// connections of its own, made from the client's options with go-redis's retries off, and
// resends a lock command only with the same REQ id, which the server applies at most once.
//
// Owners: a handle is its own owner unless Owner(id) names one; locks.Owner() gives a scope
// whose handles share one id, so re-entry and deadlock detection work across them.
//
// One watchdog goroutine per Locks renews the holds taken without a fixed Lease, in one
// pipeline per node per tick, every third of the lease. A refused renewal makes the hold
// lost (Hold.Lost, Hold.Context); with the server's keyspace events on
// (notify-keyspace-events Kd) loss is told within a round trip.
//
// Guarded writes: hold.Guard(ctx, "SET", key, value) runs a command only while the hold
// stands, checked by the server in the same turn (RLOCK.GUARD, with the hold's fencing
// token), so a holder that paused past its lease cannot write over its successor.
//
// Durable by default: when the lock's primary has replicas, Acquire returns only once one
// acknowledged the grant (WAIT), and fails with ErrNotAcknowledged otherwise.
package rlock
