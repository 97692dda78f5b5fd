package rlock

import (
	"context"
	"time"
)

// MultiLock takes several locks together, all or none (RLOCK.MACQUIRE). Each name counts
// once, and they are sent sorted. In a cluster the names must share a slot (a hash tag such
// as {order:7}); names in different slots are refused before anything is sent.
type MultiLock struct {
	l     *Locks
	names []string
	o     options
	err   error
}

// MultiLock is a handle on names, with an owner of its own (or Owner(id)). Options: Wait,
// WaitForever, Lease, Session, Owner.
func (l *Locks) MultiLock(names []string, opts ...Option) *MultiLock {
	o := collect(opts)
	m := &MultiLock{l: l, o: o}
	m.names, m.err = multiNames(names)
	if m.err == nil && l != nil && l.cluster != nil {
		m.err = checkSameSlot(m.names)
	}
	if m.err == nil {
		m.err = o.check(m.names[0])
	}
	if m.err == nil && (o.fair || o.fenced) {
		m.err = invalid(m.names[0], "Fair and Fenced do not apply to a multi-key lock")
	}
	if !o.ownerSet && l != nil {
		m.o.owner = l.newOwner()
	}
	return m
}

// OwnerID is the owner id every acquire through this handle uses.
func (m *MultiLock) OwnerID() string { return m.o.owner }

func (m *MultiLock) lease() time.Duration {
	if m.o.leaseSet {
		return m.o.lease
	}
	return m.l.cfg.watchdogLease
}

// MultiHold is what a MultiLock's Acquire returns.
type MultiHold struct {
	m        *MultiLock
	holds    []*Hold
	ctx      context.Context
	cancel   context.CancelCauseFunc
	released releaseOnce
}

// Acquire takes every lock or none; an error wrapping ErrNotAcquired when not all could be
// taken (within the wait). Cancelling ctx leaves nothing held, as for Lock.Acquire.
func (m *MultiLock) Acquire(ctx context.Context) (*MultiHold, error) {
	if m == nil {
		return nil, invalid("", "a nil *MultiLock")
	}
	if m.err != nil {
		return nil, m.err
	}
	if err := m.l.usable(ctx); err != nil {
		return nil, err
	}
	req := newRequestID()
	basis := time.Now()
	r, err := m.l.takeCall(ctx, m.names[0], m.acquireArgs(req), m.recoveryArgs(req), []string{"rlock.macquire"}, m.o.wait,
		func(ctx context.Context, _ reply) {
			_, _ = m.l.do(ctx, m.names[0], true, m.releaseArgs(newRequestID())...)
		})
	if err != nil {
		return nil, err
	}
	ok, err := readTaken(r, "RLOCK.MACQUIRE", m.names[0], m.o.owner)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, newError(ErrNotAcquired, m.names[0], "a lock of the set is held by another owner")
	}
	if m.o.wait.blocks() {
		basis = time.Now()
	}
	ctxH, cancel := context.WithCancelCause(context.Background())
	mh := &MultiHold{m: m, ctx: ctxH, cancel: cancel}
	for _, name := range m.names {
		k := &Lock{l: m.l, name: name, o: m.o}
		h := &Hold{lock: k, ctx: ctxH, cancel: cancel, count: 1}
		h.entry, h.hid = m.l.wd.register(k.hk(), m.lease(), !m.o.leaseSet, basis, cancel)
		mh.holds = append(mh.holds, h)
	}
	return mh, nil
}

func (m *MultiLock) acquireArgs(req string) []any {
	return macquireArgs(m.o.owner, m.names, m.lease(), m.o.wait, m.o.session, req)
}

// recoveryArgs is the acquire sent again, without BLOCK and SESSION, to learn what a wait
// given up without its reply was granted (the same REQ id).
func (m *MultiLock) recoveryArgs(req string) []any {
	return macquireArgs(m.o.owner, m.names, m.lease(), waitSpec{}, false, req)
}

func (m *MultiLock) releaseArgs(req string) []any { return mreleaseArgs(m.o.owner, m.names, req) }

// scoped is the handle Do acquires with: waiting until granted unless the handle sets a Wait.
func (m *MultiLock) scoped() *MultiLock {
	c := *m
	c.o = m.o.scoped()
	return &c
}

// Do takes every lock, runs fn, and releases them. It waits until granted unless the handle
// sets a Wait, and returns an error wrapping ErrNotAcquired without running fn when the wait
// ends first. fn's context is cancelled if any of the locks is lost; a loss while fn ran is
// returned (wrapping ErrLost) when fn itself returned nil.
func (m *MultiLock) Do(ctx context.Context, fn func(ctx context.Context, h *MultiHold) error) error {
	if m == nil {
		return invalid("", "a nil *MultiLock")
	}
	if fn == nil {
		return invalid("", "a nil function")
	}
	return runHeld[*MultiHold, int](ctx, m.scoped().Acquire, fn)
}

// Context is cancelled when any of the locks is lost, or the set is released.
func (h *MultiHold) Context() context.Context { return h.ctx }

// Err is an error wrapping ErrLost once any of the locks is lost.
func (h *MultiHold) Err() error {
	for _, x := range h.holds {
		if err := x.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Release gives back one hold on every lock (RLOCK.MRELEASE); how many are free now.
func (h *MultiHold) Release(ctx context.Context) (int, error) {
	m := h.m
	if err := m.l.usable(ctx); err != nil {
		return 0, err
	}
	if !h.released.first() {
		return 0, notHeld(m.names[0], m.o.owner, "released already")
	}
	lost := h.Err()
	for _, x := range h.holds {
		m.l.wd.unregister(x.lock.hk(), x.entry, x.hid)
	}
	r, err := m.l.do(ctx, m.names[0], true, m.releaseArgs(newRequestID())...)
	if err != nil {
		return 0, err
	}
	n, err := readMRelease(r, m.names, m.o.owner)
	if err != nil {
		return 0, err
	}
	if lost != nil {
		return int(n), lost
	}
	return int(n), nil
}
