package rlock

import (
	"context"
	"time"
)

// Semaphore is Redisson's RSemaphore on its key: permits without owners.
type Semaphore struct {
	l    *Locks
	name string
	o    options
	err  error
}

// Semaphore is a handle on the semaphore name. Options: Wait, WaitForever.
func (l *Locks) Semaphore(name string, opts ...Option) *Semaphore {
	o := collect(opts)
	return &Semaphore{l: l, name: name, o: o, err: o.check(name)}
}

func (s *Semaphore) usable(ctx context.Context) error {
	if s == nil {
		return invalid("", "a nil semaphore")
	}
	if s.err != nil {
		return s.err
	}
	return s.l.usable(ctx)
}

func checkPermits(name string, n int) error {
	if n < 1 || n > 2147483647 {
		return invalid(name, "permits must be from 1 to 2147483647")
	}
	return nil
}

// intCall sends one command whose reply is an integer.
func (l *Locks) intCall(ctx context.Context, key string, resend bool, args ...any) (int64, error) {
	v, _, err := l.doValue(ctx, key, resend, args...)
	if err != nil {
		return 0, err
	}
	n, ok := asInt(v)
	if !ok {
		return 0, unexpected(args[0].(string), v)
	}
	return n, nil
}

// TrySetPermits sets the permits if the semaphore does not exist; true if it set them.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	if n < 0 || n > 2147483647 {
		return false, invalid(s.name, "permits must be from 0 to 2147483647")
	}
	v, err := s.l.intCall(ctx, s.name, false, "RSEM.TRYSETPERMITS", s.name, int64(n))
	return v == 1, err
}

// AddPermits adds n permits (negative takes away); the permits available now.
func (s *Semaphore) AddPermits(ctx context.Context, n int) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	return s.l.intCall(ctx, s.name, false, "RSEM.ADDPERMITS", s.name, int64(n))
}

// Available is the permits available now.
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	return s.l.intCall(ctx, s.name, true, "RSEM.AVAILABLE", s.name)
}

// Permits are permits taken from a Semaphore.
type Permits struct {
	s        *Semaphore
	n        int
	released releaseOnce
}

// Count is how many permits these are.
func (p *Permits) Count() int { return p.n }

// Acquire takes n permits, waiting as the handle says; an error wrapping ErrNotAcquired
// when fewer are available (after the wait). Cancelling ctx leaves none taken.
func (s *Semaphore) Acquire(ctx context.Context, n int) (*Permits, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	if err := checkPermits(s.name, n); err != nil {
		return nil, err
	}
	req := newRequestID()
	r, err := s.l.takeCall(ctx, s.name, semAcquireArgs(s.name, n, s.o.wait, req), semAcquireArgs(s.name, n, waitSpec{}, req),
		[]string{"rsem.acquire"}, s.o.wait, func(ctx context.Context, _ reply) {
			_, _ = s.l.do(ctx, s.name, true, semReleaseArgs(s.name, n, newRequestID())...)
		})
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.isNil {
		return nil, newError(ErrNotAcquired, s.name, "not enough permits")
	}
	return &Permits{s: s, n: n}, nil
}

// Release gives the permits back; the permits available now.
func (p *Permits) Release(ctx context.Context) (int64, error) {
	s := p.s
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	if !p.released.first() {
		return 0, newError(ErrNotHeld, s.name, "released already")
	}
	return s.l.intCall(ctx, s.name, true, semReleaseArgs(s.name, p.n, newRequestID())...)
}

// PermitExpirableSemaphore is Redisson's RPermitExpirableSemaphore: permits leased one by
// one, each with an id, each given back by the server when its lease ends.
type PermitExpirableSemaphore struct {
	Semaphore
}

// PermitExpirableSemaphore is a handle on name. Options: Lease (a fixed lease; without it
// the watchdog renews the permit), Wait, WaitForever.
func (l *Locks) PermitExpirableSemaphore(name string, opts ...Option) *PermitExpirableSemaphore {
	return &PermitExpirableSemaphore{Semaphore: *l.Semaphore(name, opts...)}
}

// LeasedPermit is one leased permit.
type LeasedPermit struct {
	s        *PermitExpirableSemaphore
	id       string
	entry    *entry
	hid      uint64
	ctx      context.Context
	released releaseOnce
}

// ID is the permit's id, 32 hex characters.
func (p *LeasedPermit) ID() string { return p.id }

// Lost is closed when the permit's lease ended before it was given back.
func (p *LeasedPermit) Lost() <-chan struct{} { return p.entry.lost }

// Context is cancelled when the permit is lost or released.
func (p *LeasedPermit) Context() context.Context { return p.ctx }

func (s *PermitExpirableSemaphore) lease() time.Duration {
	if s.o.leaseSet {
		return s.o.lease
	}
	return s.l.cfg.watchdogLease
}

// Acquire leases one permit, waiting as the handle says; an error wrapping ErrNotAcquired
// when none is available (after the wait). Cancelling ctx leaves none leased.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context) (*LeasedPermit, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	req := newRequestID()
	basis := time.Now()
	r, err := s.l.takeCall(ctx, s.name, semLeaseArgs(s.name, 1, s.lease(), s.o.wait, req), semLeaseArgs(s.name, 1, s.lease(), waitSpec{}, req),
		[]string{"rsem.lease"}, s.o.wait, func(ctx context.Context, r reply) {
			ids, _ := r.val.([]any)
			for _, id := range ids {
				_, _ = s.l.do(ctx, s.name, true, "RSEM.RETURN", s.name, id, "REQ", newRequestID())
			}
		})
	if err != nil {
		return nil, err
	}
	if s.o.wait.blocks() {
		basis = time.Now()
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.isNil {
		return nil, newError(ErrNotAcquired, s.name, "no permit available")
	}
	ids, ok := r.val.([]any)
	if !ok || len(ids) != 1 {
		return nil, unexpected("RSEM.LEASE", r.val)
	}
	id, _ := asText(ids[0])
	pctx, cancel := context.WithCancelCause(context.Background())
	p := &LeasedPermit{s: s, id: id, ctx: pctx}
	p.entry, p.hid = s.l.wd.register(holdKey{key: s.name, owner: id, permit: true}, s.lease(), !s.o.leaseSet, basis, cancel)
	return p, nil
}

// Renew sets the permit's lease to its full length from now (RSEM.RENEW); an error wrapping
// ErrLost when it is no longer leased.
func (p *LeasedPermit) Renew(ctx context.Context) error {
	s := p.s
	if err := s.usable(ctx); err != nil {
		return err
	}
	basis := time.Now()
	n, err := s.l.intCall(ctx, s.name, true, "RSEM.RENEW", s.name, p.id, "LEASE", millis(s.lease()))
	if err != nil {
		return err
	}
	k := holdKey{key: s.name, owner: p.id, permit: true}
	if n != 1 {
		s.l.wd.markLost(k, p.entry, "the permit is no longer leased")
		return p.entry.lostErr(&s.l.wd.mu)
	}
	s.l.wd.renewed(k, p.entry, basis)
	return nil
}

// Release gives the permit back (RSEM.RETURN); false when it was no longer leased.
func (p *LeasedPermit) Release(ctx context.Context) (bool, error) {
	s := p.s
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	if !p.released.first() {
		return false, newError(ErrNotHeld, s.name, "released already")
	}
	s.l.wd.unregister(holdKey{key: s.name, owner: p.id, permit: true}, p.entry, p.hid)
	n, err := s.l.intCall(ctx, s.name, true, "RSEM.RETURN", s.name, p.id, "REQ", newRequestID())
	return n == 1, err
}

// CountDownLatch is Redisson's RCountDownLatch: AwaitZero passes once the count is zero.
type CountDownLatch struct {
	s Semaphore
}

// CountDownLatch is a handle on the latch name. Options: Wait, WaitForever (for AwaitZero).
func (l *Locks) CountDownLatch(name string, opts ...Option) *CountDownLatch {
	return &CountDownLatch{s: *l.Semaphore(name, opts...)}
}

// TrySetCount sets the count (≥ 1) if the latch has none; true if it set it.
func (c *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if err := c.s.usable(ctx); err != nil {
		return false, err
	}
	if n < 1 {
		return false, invalid(c.s.name, "a count must be at least 1")
	}
	v, err := c.s.l.intCall(ctx, c.s.name, false, "RLATCH.TRYSETCOUNT", c.s.name, n)
	return v == 1, err
}

// CountDown counts down by one; the count now.
func (c *CountDownLatch) CountDown(ctx context.Context) (int64, error) {
	if err := c.s.usable(ctx); err != nil {
		return 0, err
	}
	return c.s.l.intCall(ctx, c.s.name, false, "RLATCH.COUNTDOWN", c.s.name)
}

// Count is the count now.
func (c *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if err := c.s.usable(ctx); err != nil {
		return 0, err
	}
	return c.s.l.intCall(ctx, c.s.name, true, "RLATCH.COUNT", c.s.name)
}

// AwaitZero waits (in the server, as the handle says) for the count to reach zero: nil once
// it has, an error wrapping ErrNotAcquired when the wait ended first.
func (c *CountDownLatch) AwaitZero(ctx context.Context) error {
	s := &c.s
	if err := s.usable(ctx); err != nil {
		return err
	}
	args := latchAwaitArgs(s.name, s.o.wait)
	var r []reply
	var err error
	if s.o.wait.blocks() {
		b := blocking{key: s.name, cmds: [][]any{args}, names: []string{"rlatch.await"}, wait: s.o.wait}
		r, err = s.l.callBlocking(ctx, b, func([]reply, bool) {})
	} else {
		r, err = s.l.pipe(ctx, s.name, true, args)
	}
	if err != nil {
		return err
	}
	if r[0].err != nil {
		return r[0].err
	}
	if r[0].isNil {
		return newError(ErrNotAcquired, s.name, "the latch did not open within the wait")
	}
	return nil
}
