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
	return s.l.usableFor(ctx, s.err)
}

func checkPermits(name string, n int) error {
	if n < 1 || n > 2147483647 {
		return invalid(name, "permits must be from 1 to 2147483647")
	}
	return nil
}

// intCall sends one command whose reply is an integer.
func (l *Locks) intCall(ctx context.Context, key string, resend bool, args ...any) (int64, error) {
	r, err := l.do(ctx, key, resend, args...)
	if err != nil {
		return 0, err
	}
	return readInt(r, args[0].(string))
}

// TrySetPermits sets the permits if the semaphore does not exist; true if it set them.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	if n < 0 || n > 2147483647 {
		return false, invalid(s.name, "permits must be from 0 to 2147483647")
	}
	r, err := s.l.do(ctx, s.name, false, trySetPermitsArgs(s.name, n)...)
	if err != nil {
		return false, err
	}
	return readFlag(r, "RSEM.TRYSETPERMITS")
}

// AddPermits adds n permits (negative takes away); the permits available now.
func (s *Semaphore) AddPermits(ctx context.Context, n int) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	return s.l.intCall(ctx, s.name, false, addPermitsArgs(s.name, n)...)
}

// Available is the permits available now.
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	return s.l.intCall(ctx, s.name, true, availableArgs(s.name)...)
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
	ok, err := readTaken(r, "RSEM.ACQUIRE", s.name, "")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, newError(ErrNotAcquired, s.name, "not enough permits")
	}
	return &Permits{s: s, n: n}, nil
}

// Release adds n permits (Redisson's RSemaphore.release: permits have no owner, so any
// caller may give them); the permits available now. Permits.Release gives back what an
// Acquire took.
func (s *Semaphore) Release(ctx context.Context, n int) (int64, error) {
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	if err := checkPermits(s.name, n); err != nil {
		return 0, err
	}
	return s.l.intCall(ctx, s.name, true, semReleaseArgs(s.name, n, newRequestID())...)
}

// Release gives the permits back; the permits available now.
func (p *Permits) Release(ctx context.Context) (int64, error) {
	s := p.s
	if err := s.usable(ctx); err != nil {
		return 0, err
	}
	if !p.released.first() {
		return 0, notHeld(s.name, "", "released already")
	}
	return s.Release(ctx, p.n)
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
	ps, err := s.AcquireMany(ctx, 1)
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// AcquireMany leases n permits together, all or none, each with an id and a lease of its
// own; an error wrapping ErrNotAcquired when fewer are available (after the wait).
// Cancelling ctx leaves none leased.
func (s *PermitExpirableSemaphore) AcquireMany(ctx context.Context, n int) ([]*LeasedPermit, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	if err := checkPermits(s.name, n); err != nil {
		return nil, err
	}
	req := newRequestID()
	basis := time.Now()
	r, err := s.l.takeCall(ctx, s.name, semLeaseArgs(s.name, n, s.lease(), s.o.wait, req), semLeaseArgs(s.name, n, s.lease(), waitSpec{}, req),
		[]string{"rsem.lease"}, s.o.wait, func(ctx context.Context, r reply) {
			ids, _, _ := readLeased(r)
			for _, id := range ids {
				_, _ = s.l.do(ctx, s.name, true, returnArgs(s.name, id, newRequestID())...)
			}
		})
	if err != nil {
		return nil, err
	}
	if s.o.wait.blocks() {
		basis = time.Now()
	}
	ids, ok, err := readLeased(r)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, newError(ErrNotAcquired, s.name, "not enough permits available")
	}
	out := make([]*LeasedPermit, len(ids))
	for i, id := range ids {
		pctx, cancel := context.WithCancelCause(context.Background())
		p := &LeasedPermit{s: s, id: id, ctx: pctx}
		p.entry, p.hid = s.l.wd.register(holdKey{key: s.name, owner: id, permit: true}, s.lease(), !s.o.leaseSet, basis, cancel)
		out[i] = p
	}
	return out, nil
}

// Release gives back the permit leased under id (RSEM.RETURN), whoever leased it: for a
// permit leased before a restart, or by another process. False when it was no longer
// leased. LeasedPermit.Release gives back a permit this process holds.
func (s *PermitExpirableSemaphore) Release(ctx context.Context, id string) (bool, error) {
	if err := s.usable(ctx); err != nil {
		return false, err
	}
	if id == "" {
		return false, invalid(s.name, "a permit id must not be empty")
	}
	r, err := s.l.do(ctx, s.name, true, returnArgs(s.name, id, newRequestID())...)
	if err != nil {
		return false, err
	}
	return readFlag(r, "RSEM.RETURN")
}

// Renew sets the permit's lease to its full length from now (RSEM.RENEW); an error wrapping
// ErrLost when it is no longer leased.
func (p *LeasedPermit) Renew(ctx context.Context) error {
	s := p.s
	if err := s.usable(ctx); err != nil {
		return err
	}
	basis := time.Now()
	r, err := s.l.do(ctx, s.name, true, permitRenewArgs(s.name, p.id, s.lease())...)
	if err != nil {
		return err
	}
	k := holdKey{key: s.name, owner: p.id, permit: true}
	switch renewal(r) {
	case renewLost:
		s.l.wd.markLost(k, p.entry, "the permit is no longer leased")
		return p.entry.lostErr(&s.l.wd.mu)
	case renewRetry:
		if r.err != nil {
			return r.err
		}
		return unexpected("RSEM.RENEW", r.val)
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
		return false, notHeld(s.name, p.id, "released already")
	}
	s.l.wd.unregister(holdKey{key: s.name, owner: p.id, permit: true}, p.entry, p.hid)
	return s.Release(ctx, p.id)
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
	r, err := c.s.l.do(ctx, c.s.name, false, trySetCountArgs(c.s.name, n)...)
	if err != nil {
		return false, err
	}
	return readFlag(r, "RLATCH.TRYSETCOUNT")
}

// CountDown counts down by one; the count now.
func (c *CountDownLatch) CountDown(ctx context.Context) (int64, error) {
	if err := c.s.usable(ctx); err != nil {
		return 0, err
	}
	return c.s.l.intCall(ctx, c.s.name, false, countDownArgs(c.s.name)...)
}

// Count is the count now.
func (c *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if err := c.s.usable(ctx); err != nil {
		return 0, err
	}
	return c.s.l.intCall(ctx, c.s.name, true, latchCountArgs(c.s.name)...)
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
	open, err := readTaken(r[0], "RLATCH.AWAIT", s.name, "")
	if err != nil {
		return err
	}
	if !open {
		return newError(ErrNotAcquired, s.name, "the latch did not open within the wait")
	}
	return nil
}
