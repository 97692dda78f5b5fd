package rlock

// OwnerScope gives handles that all share one owner id, so re-entry and deadlock detection
// work across the locks one piece of work takes (Go has no thread identity to share).
type OwnerScope struct {
	l  *Locks
	id string
}

// Owner is a new owner scope with an id of its own, <client-uuid>:<n>.
func (l *Locks) Owner() *OwnerScope { return &OwnerScope{l: l, id: l.newOwner()} }

// ID is the scope's owner id.
func (o *OwnerScope) ID() string { return o.id }

// Lock is a handle on name owned by this scope.
func (o *OwnerScope) Lock(name string, opts ...Option) *Lock {
	return o.l.Lock(name, append(opts, Owner(o.id))...)
}

// RWLock is a read-write lock owned by this scope.
func (o *OwnerScope) RWLock(name string, opts ...Option) *RWLock {
	return o.l.RWLock(name, append(opts, Owner(o.id))...)
}

// MultiLock is a multi-key lock owned by this scope.
func (o *OwnerScope) MultiLock(names []string, opts ...Option) *MultiLock {
	return o.l.MultiLock(names, append(opts, Owner(o.id))...)
}
