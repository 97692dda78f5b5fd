package rlock

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Info is RLOCK.INFO on name: holders, lease left, fair queue, blocked waiters, fencing
// counter.
func (l *Locks) Info(ctx context.Context, name string) (LockInfo, error) {
	if err := l.usable(ctx); err != nil {
		return LockInfo{}, err
	}
	if err := checkName(name); err != nil {
		return LockInfo{}, err
	}
	v, _, err := l.doValue(ctx, name, true, infoArgs(name)...)
	if err != nil {
		return LockInfo{}, err
	}
	return parseInfo(v)
}

// Waiters is RLOCK.WAITERS on name: the calls blocked on it, in serving order.
func (l *Locks) Waiters(ctx context.Context, name string) ([]Waiter, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	v, _, err := l.doValue(ctx, name, true, waitersArgs(name)...)
	if err != nil {
		return nil, err
	}
	return parseWaiters(v)
}

// ForceRelease is RLOCK.FORCERELEASE: deletes the lock whoever holds it; true if there was
// one. Its holders learn it at their next renewal, or within 100 ms with keyspace events.
func (l *Locks) ForceRelease(ctx context.Context, name string) (bool, error) {
	if err := l.usable(ctx); err != nil {
		return false, err
	}
	if err := checkName(name); err != nil {
		return false, err
	}
	r, err := l.do(ctx, name, false, forceReleaseArgs(name)...)
	if err != nil {
		return false, err
	}
	return readFlag(r, "RLOCK.FORCERELEASE")
}

// primaries runs f on every primary (the one server, or each primary of a cluster).
func (l *Locks) primaries(ctx context.Context, f func(ctx context.Context, c *redis.Client) error) error {
	if err := l.usable(ctx); err != nil {
		return err
	}
	if l.single != nil {
		n, err := l.nodeFor(ctx, "")
		if err != nil {
			return err
		}
		return f(ctx, n.short)
	}
	return l.cluster.ForEachMaster(ctx, f)
}

func nodeName(l *Locks, c *redis.Client) string {
	if l.cluster == nil {
		return ""
	}
	return c.Options().Addr
}

// Scan lists the locks (RLOCK.SCAN) whose names match the glob pattern ("" for all), on
// every primary.
func (l *Locks) Scan(ctx context.Context, match string) ([]ScannedLock, error) {
	return l.ScanType(ctx, match, "")
}

// ScanType is Scan of one type of lock: "LOCK" (reentrant locks) or "RWLOCK" (read-write
// locks); "" for both.
func (l *Locks) ScanType(ctx context.Context, match, kind string) ([]ScannedLock, error) {
	var mu sync.Mutex
	var out []ScannedLock
	err := l.primaries(ctx, func(ctx context.Context, c *redis.Client) error {
		cursor := "0"
		for {
			v, err := c.Do(ctx, scanArgs(cursor, match, kind)...).Result()
			if err != nil {
				return err
			}
			next, locks, err := parseScan(v)
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, locks...)
			mu.Unlock()
			if next == "0" {
				return nil
			}
			cursor = next
		}
	})
	return out, err
}

// Stats is INFO rlock of every primary.
func (l *Locks) Stats(ctx context.Context) ([]ServerStats, error) {
	var mu sync.Mutex
	var out []ServerStats
	err := l.primaries(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Do(ctx, statsArgs()...).Text()
		if err != nil {
			return err
		}
		mu.Lock()
		out = append(out, parseStats(info, nodeName(l, c)))
		mu.Unlock()
		return nil
	})
	return out, err
}

// Top is RLOCK.TOP COUNT n on every primary: the most contended keys.
func (l *Locks) Top(ctx context.Context, n int) ([]ContendedKey, error) {
	args, err := topArgs(n)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var out []ContendedKey
	err = l.primaries(ctx, func(ctx context.Context, c *redis.Client) error {
		v, err := c.Do(ctx, args...).Result()
		if err != nil {
			return err
		}
		top, err := parseTop(v, nodeName(l, c))
		mu.Lock()
		out = append(out, top...)
		mu.Unlock()
		return err
	})
	return out, err
}
