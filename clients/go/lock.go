package rlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errReleased is the cause of a Hold's context once the hold was released.
var errReleased = errors.New("rlock: hold released")

// Lock is a handle on one lock: a name, an owner id and options. Taking one sends nothing.
// A handle is its own owner unless Owner(id) names one: Acquire twice through one handle
// re-enters; two handles from two Lock calls exclude each other.
type Lock struct {
	l    *Locks
	name string
	side Side
	o    options
	err  error
}

// Lock is a handle on the lock name. Options: Wait, WaitForever, Lease, Fenced, Fair,
// Session, Owner, SyncReplicas, SyncTimeout.
func (l *Locks) Lock(name string, opts ...Option) *Lock {
	return l.handle(name, "", opts)
}

func (l *Locks) handle(name string, side Side, opts []Option) *Lock {
	o := collect(opts)
	lk := &Lock{l: l, name: name, side: side, o: o, err: o.check(name)}
	if !o.ownerSet && l != nil {
		lk.o.owner = l.newOwner()
	}
	return lk
}

// Name is the lock's name (its key).
func (k *Lock) Name() string { return k.name }

// OwnerID is the owner id every acquire through this handle uses.
func (k *Lock) OwnerID() string { return k.o.owner }

func (k *Lock) lease() time.Duration {
	if k.o.leaseSet {
		return k.o.lease
	}
	return k.l.cfg.watchdogLease
}

func (k *Lock) plan() acquirePlan {
	return acquirePlan{key: k.name, owner: k.o.owner, side: k.side, lease: k.lease(), wait: k.o.wait,
		fair: k.o.fair, fenced: k.o.fenced, session: k.o.session}
}

func (k *Lock) hk() holdKey { return holdKey{key: k.name, owner: k.o.owner, side: k.side} }

// usable checks the call before anything is sent.
func (k *Lock) usable(ctx context.Context) error {
	if k == nil {
		return invalid("", "a nil *Lock")
	}
	return k.l.usableFor(ctx, k.err)
}

// replicasWanted settles the acknowledgement: how many replicas must ack (0: no WAIT). The
// replica count is read only when the answer depends on it.
func (k *Lock) replicasWanted(ctx context.Context) (int, time.Duration, error) {
	if k.o.syncSet || k.l.cfg.durable == 0 {
		n, timeout := k.settle(0)
		return n, timeout, nil
	}
	attached, err := k.l.replicasOf(ctx, k.name)
	if err != nil {
		return 0, 0, err
	}
	n, timeout := k.settle(attached)
	return n, timeout, nil
}

// settle is the acknowledgement asked when the key's primary has attached replicas: the
// handle's SyncReplicas, or the Locks' default, at most as many as are attached; and the
// WAIT's timeout.
func (k *Lock) settle(attached int) (int, time.Duration) {
	timeout := k.o.syncTimeout
	if timeout == 0 {
		timeout = k.l.cfg.durableTimeout
	}
	if k.o.syncSet {
		return k.o.syncReplicas, timeout
	}
	return min(attached, k.l.cfg.durable), timeout
}

// Acquire takes the lock, or re-enters it if this handle's owner holds it already. Without
// a wait it tries once. It returns an error wrapping ErrNotAcquired when the lock was not
// granted (the wait ran out, or ctx ended: then the error also wraps ctx.Err()),
// *DeadlockError when the server refused a wait that closes a cycle, ErrNotAcknowledged when
// replicas did not acknowledge the grant in time (it was released).
//
// A wait runs in the server (BLOCK) on a connection of its own. Cancelling ctx at any moment
// leaves nothing held: the server forgets the waiter, and a grant that raced the cancel is
// found (by its REQ id) and released before Acquire returns.
func (k *Lock) Acquire(ctx context.Context) (*Hold, error) {
	if err := k.usable(ctx); err != nil {
		return nil, err
	}
	h, err := k.acquire(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrNotAcknowledged) {
		// The context ended before a request was sent (or its reply was read and given back).
		return nil, fmt.Errorf("%w: %w", ErrNotAcquired, ctx.Err())
	}
	return h, err
}

func (k *Lock) acquire(ctx context.Context) (*Hold, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	replicas, timeout, err := k.replicasWanted(ctx)
	if err != nil {
		return nil, err
	}
	p := k.plan()
	req := newRequestID()
	cmds := p.pipeline(req, replicas, timeout)
	basis := time.Now()
	var replies []reply
	var pinned *pin
	// A SESSION hold lives on a connection of its own (pinned to the Hold), never on a
	// pooled one that go-redis may close or hand to other commands.
	if !p.wait.blocks() && replicas == 0 && !p.session {
		// Once sent, a single try is read to its end: a reply cut off by ctx could be a grant.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		replies, err = k.l.pipe(context.WithoutCancel(ctx), k.name, true, cmds...)
	} else {
		b := blocking{key: k.name, cmds: cmds, names: []string{"rlock.acquire", "wait"}, wait: p.wait}
		if replicas > 0 {
			b.extra = timeout
		}
		if p.session {
			b.keep = func(n *node, d *dedicated) { pinned = &pin{n: n, d: d} }
		}
		replies, err = k.l.callBlocking(ctx, b, func(rs []reply, read bool) { k.undo(p, req, rs, read) })
	}
	if err != nil {
		return nil, err
	}
	if p.wait.blocks() || replicas > 0 {
		// Granted some time between send and reply; set a WAIT's own time aside.
		if b := time.Now().Add(-timeout); b.After(basis) {
			basis = b
		}
	}
	h, err := k.grant(ctx, replies, replicas, basis, pinned)
	if err != nil && pinned != nil {
		pinned.n.giveBack(pinned.d)
	}
	return h, err
}

// pin is the connection a SESSION hold taken with a wait lives on.
type pin struct {
	n *node
	d *dedicated
}

// grant reads an acquire's replies into a Hold.
func (k *Lock) grant(ctx context.Context, replies []reply, replicas int, basis time.Time, pinned *pin) (*Hold, error) {
	g, ok, err := readGrant(replies, k.o.fenced, replicas, k.name, k.o.owner)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, newError(ErrNotAcquired, k.name, "held by another owner")
	}
	h := k.newHold(basis)
	h.pinned = pinned
	h.token, h.count, h.acked = g.token, g.count, g.acked
	if !g.acknowledged(replicas) {
		// Given back under a new REQ id (Release), then refused.
		k.l.staleReplicas()
		h.pinned = nil
		_, _ = h.Release(context.WithoutCancel(ctx))
		return nil, newError(ErrNotAcknowledged, k.name, fmt.Sprintf("%d of %d replicas acknowledged the grant", g.acked, replicas))
	}
	return h, nil
}

func (k *Lock) newHold(basis time.Time) *Hold {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &Hold{lock: k, ctx: ctx, cancel: cancel}
	h.entry, h.hid = k.l.wd.register(k.hk(), k.lease(), !k.o.leaseSet, basis, cancel)
	return h
}

// undo gives back what a wait given up may have been granted (see Locks.callBlocking).
func (k *Lock) undo(p acquirePlan, req string, rs []reply, read bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*k.l.cfg.responseTimeout)
	defer cancel()
	if read {
		// A SESSION grant read here is released too: its connection may live on.
		if len(rs) > 0 && rs[0].err == nil && !rs[0].isNil {
			_, _ = k.release(ctx)
		}
		return
	}
	if p.session {
		return // a session hold ends with its connection, a delivered grant too
	}
	// The replies were lost with the connection: the same acquire with the same REQ id and
	// no BLOCK replies the first reply while that grant stands (or tries once).
	r, err := k.l.do(ctx, k.name, true, p.recovery(req)...)
	if err == nil && r.err == nil && !r.isNil {
		_, _ = k.release(ctx)
	}
}

// release sends RLOCK.RELEASE with a new REQ id, resent once if the connection broke.
func (k *Lock) release(ctx context.Context) (bool, error) {
	r, err := k.l.do(ctx, k.name, true, k.releaseArgs(newRequestID())...)
	if err != nil {
		return false, err
	}
	return readRelease(r, k.name, k.o.owner)
}

func (k *Lock) releaseArgs(req string) []any { return releaseArgs(k.name, k.o.owner, k.side, req) }

func (k *Lock) renewArgs(req string) []any {
	return renewArgs(k.name, k.o.owner, k.side, k.lease(), req)
}

// heldArgs asks whether this handle's owner holds the lock (on its side).
func (k *Lock) heldArgs() []any { return []any{"HEXISTS", k.name, field(k.o.owner, k.side)} }

func (k *Lock) holdCountArgs() []any { return []any{"HGET", k.name, field(k.o.owner, k.side)} }

// Unlock releases one hold of this handle's owner without a Hold (RLOCK.RELEASE, Redisson's
// unlock): for a hold taken before a restart under a stable Owner id. True when the lock is
// now free; an error wrapping ErrNotHeld when the owner held nothing.
func (k *Lock) Unlock(ctx context.Context) (bool, error) {
	if err := k.usable(ctx); err != nil {
		return false, err
	}
	return k.release(ctx)
}

// HoldCount is how many holds this handle's owner has on the lock (HGET); 0 when none.
func (k *Lock) HoldCount(ctx context.Context) (int64, error) {
	if err := k.usable(ctx); err != nil {
		return 0, err
	}
	r, err := k.l.do(ctx, k.name, true, k.holdCountArgs()...)
	if err != nil {
		return 0, err
	}
	return readHoldCount(r)
}

// IsHeld says whether this handle's owner holds the lock, on its side for a read-write
// lock (HEXISTS).
func (k *Lock) IsHeld(ctx context.Context) (bool, error) {
	if err := k.usable(ctx); err != nil {
		return false, err
	}
	r, err := k.l.do(ctx, k.name, true, k.heldArgs()...)
	if err != nil {
		return false, err
	}
	return readFlag(r, "HEXISTS")
}

// RemainingLease is the lease left on the lock (PTTL); false when the lock is free (or its
// key has no expiry).
func (k *Lock) RemainingLease(ctx context.Context) (time.Duration, bool, error) {
	if err := k.usable(ctx); err != nil {
		return 0, false, err
	}
	r, err := k.l.do(ctx, k.name, true, pttlArgs(k.name)...)
	if err != nil {
		return 0, false, err
	}
	return readPTTL(r)
}

// IsLocked says whether anyone holds the lock (EXISTS).
func (k *Lock) IsLocked(ctx context.Context) (bool, error) {
	if err := k.usable(ctx); err != nil {
		return false, err
	}
	r, err := k.l.do(ctx, k.name, true, existsArgs(k.name)...)
	if err != nil {
		return false, err
	}
	return readFlag(r, "EXISTS")
}

// releaseOnce lets a hold be released once: a second Release sends nothing.
type releaseOnce struct {
	mu   sync.Mutex
	done bool
}

// first is true the first time only.
func (r *releaseOnce) first() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := !r.done
	r.done = true
	return first
}

// isDone says whether first has been called, without calling it.
func (r *releaseOnce) isDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Hold is what a successful Acquire returns. Its Context is cancelled when the hold is
// lost (cause: an error wrapping ErrLost) or released, so work started under the lock stops
// with it. Release it from any goroutine.
type Hold struct {
	lock     *Lock
	token    int64
	count    int64
	acked    int
	ctx      context.Context
	cancel   context.CancelCauseFunc
	entry    *entry
	hid      uint64
	pinned   *pin
	released releaseOnce
}

// Name is the lock's name.
func (h *Hold) Name() string { return h.lock.name }

// Owner is the owner id that holds it.
func (h *Hold) Owner() string { return h.lock.o.owner }

// Token is the fencing token of a Fenced acquire (0 otherwise).
func (h *Hold) Token() int64 { return h.token }

// Count is the owner's hold count after this acquire (1, or more for a re-entry); 0 when not
// known (a Fenced grant whose hold count read replied null).
func (h *Hold) Count() int64 { return h.count }

// ReplicasAcked is how many replicas acknowledged the grant (0 when no WAIT was sent).
func (h *Hold) ReplicasAcked() int { return h.acked }

// Context is cancelled when the hold is lost or released; context.Cause says which.
func (h *Hold) Context() context.Context { return h.ctx }

// Lost is closed when the hold is lost (not when it is released).
func (h *Hold) Lost() <-chan struct{} { return h.entry.lost }

// Err is an error wrapping ErrLost once the hold is lost; nil while it is good.
func (h *Hold) Err() error { return h.entry.lostErr(&h.lock.l.wd.mu) }

// Renew resets the lease to its full length now (RLOCK.RENEW). An error wrapping ErrLost if
// the hold was lost or the server no longer has it.
func (h *Hold) Renew(ctx context.Context) error {
	k := h.lock
	if err := k.usable(ctx); err != nil {
		return err
	}
	if err := h.Err(); err != nil {
		return err
	}
	basis := time.Now()
	r, err := k.l.do(ctx, k.name, true, k.renewArgs(newRequestID())...)
	if err != nil {
		return err
	}
	switch renewal(r) {
	case renewLost:
		k.l.wd.markLost(k.hk(), h.entry, "the server refused the renewal: the lock expired, was deleted, force-released or written over")
		return h.Err()
	case renewRetry:
		if r.err != nil {
			return r.err
		}
		return unexpected("RLOCK.RENEW", r.val)
	}
	k.l.wd.renewed(k.hk(), h.entry, basis)
	return nil
}

// Release gives this hold back (RLOCK.RELEASE). True when the lock is now free, false when
// other re-entries of the owner still hold it. An error wrapping ErrLost if the hold had been
// lost (the release is still sent), ErrNotHeld if the server no longer had it. A second
// Release of the same Hold sends nothing and returns ErrNotHeld.
func (h *Hold) Release(ctx context.Context) (bool, error) {
	if h == nil {
		return false, invalid("", "a nil *Hold")
	}
	k := h.lock
	if err := k.usable(ctx); err != nil {
		return false, err
	}
	if !h.released.first() {
		return false, notHeld(k.name, k.o.owner, "released already")
	}
	lost := h.Err()
	k.l.wd.unregister(k.hk(), h.entry, h.hid)
	free, err := k.release(ctx)
	if h.pinned != nil {
		h.pinned.n.giveBack(h.pinned.d)
	}
	if lost != nil {
		return free, lost
	}
	return free, err
}

// scoped is the handle Do acquires with: waiting until granted unless the handle sets a Wait.
func (k *Lock) scoped() *Lock {
	c := *k
	c.o = k.o.scoped()
	return &c
}

// heldHandle is what a scoped call holds while its function runs (*Hold, *MultiHold).
type heldHandle[R any] interface {
	Context() context.Context
	Release(ctx context.Context) (R, error)
}

// runHeld is the body of the Do methods: acquire, run fn with the hold and its context, and
// release even when fn failed (on a context that is not cancelled, so the hold is not left).
// fn's error comes first, then the release's.
func runHeld[H heldHandle[R], R any](ctx context.Context, acquire func(context.Context) (H, error), fn func(context.Context, H) error) error {
	h, err := acquire(ctx)
	if err != nil {
		return err
	}
	ran := fn(h.Context(), h)
	_, rerr := h.Release(context.WithoutCancel(ctx))
	if ran != nil {
		return ran
	}
	return rerr
}

// Do acquires, runs fn with the hold, and releases. It waits until granted unless the handle
// sets a Wait, and returns an error wrapping ErrNotAcquired without running fn when the wait
// ends first. fn's context is the hold's, cancelled if the hold is lost; a loss while fn ran
// is returned (wrapping ErrLost) when fn itself returned nil.
func (k *Lock) Do(ctx context.Context, fn func(ctx context.Context, h *Hold) error) error {
	if err := k.usable(ctx); err != nil {
		return err
	}
	if fn == nil {
		return invalid(k.name, "a nil function")
	}
	return runHeld[*Hold, bool](ctx, k.scoped().Acquire, fn)
}
