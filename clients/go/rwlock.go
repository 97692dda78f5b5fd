package rlock

// RWLock is a read-write lock (Redisson's RReadWriteLock layout): many readers or one
// writer. Its Read and Write handles share one owner id.
type RWLock struct {
	l    *Locks
	name string
	opts []Option
}

// RWLock is a read-write lock on name with an owner of its own (or Owner(id)).
func (l *Locks) RWLock(name string, opts ...Option) *RWLock {
	o := collect(opts)
	if !o.ownerSet && l != nil {
		opts = append(append([]Option(nil), opts...), Owner(l.newOwner()))
	}
	return &RWLock{l: l, name: name, opts: opts}
}

// Read is a handle on the read side; opts add to the lock's.
func (r *RWLock) Read(opts ...Option) *Lock { return r.side(Read, opts) }

// Write is a handle on the write side; opts add to the lock's.
func (r *RWLock) Write(opts ...Option) *Lock { return r.side(Write, opts) }

func (r *RWLock) side(s Side, opts []Option) *Lock {
	all := append(append([]Option(nil), r.opts...), opts...)
	k := r.l.handle(r.name, s, all)
	if k.err == nil && k.o.fair {
		k.err = invalid(r.name, "Fair does not apply to a read-write lock")
	}
	return k
}
