package rlock

import "context"

// Election is a leader election on the lock name: the leader is its holder, its value the
// owner id, its term the fencing token. Candidates wait in the server, first come first
// served.
type Election struct {
	l    *Locks
	name string
	opts []Option
}

// Election is an election on name. Options: Wait (how long a campaign waits; without it, as
// long as it takes), SyncReplicas, SyncTimeout.
func (l *Locks) Election(name string, opts ...Option) *Election {
	return &Election{l: l, name: name, opts: opts}
}

// Leadership is a won campaign.
type Leadership struct {
	*Hold
}

// Value is the leader's value.
func (p *Leadership) Value() string { return p.Owner() }

// Term is the leader's term, the lock's fencing token.
func (p *Leadership) Term() int64 { return p.Token() }

// Resign steps down: the next candidate waiting is elected at once.
func (p *Leadership) Resign(ctx context.Context) error {
	_, err := p.Release(ctx)
	return err
}

// Campaign waits until value is elected (or the election's Wait ends: ErrNotAcquired), or ctx ends (then it leaves nothing behind, as
// Lock.Acquire). Give every candidate a value of its own (1 to 1024 bytes): a value that
// already leads is refused.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	if e == nil {
		return nil, invalid("", "a nil election")
	}
	h, err := e.lock(value).Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if h.Count() > 1 {
		_, _ = h.Release(context.WithoutCancel(ctx))
		return nil, invalid(e.name, "another candidate with the value "+value+" leads")
	}
	return &Leadership{Hold: h}, nil
}

// lock is the handle a campaign acquires: a fenced lock owned by value, waiting forever
// unless the election sets a wait.
func (e *Election) lock(value string) *Lock {
	opts := append(append([]Option(nil), e.opts...), Owner(value), Fenced())
	if !collect(e.opts).waitSet {
		opts = append(opts, WaitForever())
	}
	return e.l.Lock(e.name, opts...)
}

// Leader is the current leader; false when nobody leads.
func (e *Election) Leader(ctx context.Context) (Leader, bool, error) {
	if e == nil {
		return Leader{}, false, invalid("", "a nil election")
	}
	if err := e.l.usable(ctx); err != nil {
		return Leader{}, false, err
	}
	if err := checkName(e.name); err != nil {
		return Leader{}, false, err
	}
	r, err := e.l.do(ctx, e.name, true, infoArgs(e.name)...)
	if err != nil {
		return Leader{}, false, err
	}
	return readLeader(r)
}

// Observe reports each change of leader, in order, on the channel (a zero Leader when
// nobody leads), starting with the current one; each is read with RLOCK.INFO, so a leader
// and its term belong together. It learns of changes as the Rust client does (docs/COMMANDS.md,
// "observe"): while notify-keyspace-events publishes the module's events (d, or A, with K or
// E) it reads the lock on each of the lock's events, at the holder's lease end (a lapse
// nobody waits on raises no event) and every second; otherwise it reads every 50 ms and at
// once when the unlock channel says the lock was freed. It looks at notify-keyspace-events
// again every second. In a cluster it reads every 50 ms. A leader that lasts less than a
// read can be missed. The channel closes when ctx ends or the Locks is closed.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if e == nil {
		return nil, invalid("", "a nil election")
	}
	if err := e.l.usable(ctx); err != nil {
		return nil, err
	}
	if err := checkName(e.name); err != nil {
		return nil, err
	}
	out := make(chan Leader, 16)
	started := e.l.later(func() {
		defer close(out)
		e.observe(ctx, out)
	})
	if !started {
		close(out)
		return nil, ErrClosed
	}
	return out, nil
}
