package rlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// holdKey names one hold: a lock's key, its hash field (owner, or owner:write) and side, or
// a leased permit (owner is then its id).
type holdKey struct {
	key    string
	owner  string
	side   Side
	permit bool
}

// entry is one hold, shared by the Hold values of its re-entries.
type entry struct {
	id         uint64
	lease      time.Duration
	renew      bool
	validUntil time.Time
	due        time.Time
	checkNow   bool
	holds      map[uint64]func(error) // each Hold's context cancel
	lost       chan struct{}
	err        error
}

// watchdog is the one goroutine per Locks that renews every hold taken without a fixed
// lease, in one pipeline per node per tick, and declares holds lost: a refused renewal, a
// lease run out, or (with keyspace events) an event that the server no longer has it.
type watchdog struct {
	l        *Locks
	mu       sync.Mutex
	entries  map[holdKey]*entry
	nextID   uint64
	wake     chan struct{}
	keysWake chan struct{}
	start    sync.Once
	quit     chan struct{}
	wg       sync.WaitGroup
	ticks    int // renewal pipelines sent (tests read it)
	renewals int // renewals sent
}

func newWatchdog(l *Locks) *watchdog {
	return &watchdog{l: l, entries: map[holdKey]*entry{}, wake: make(chan struct{}, 1), keysWake: make(chan struct{}, 1), quit: make(chan struct{})}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// register records a grant whose request was sent at basis; returns the entry and the id
// that the Hold quotes to unregister.
func (w *watchdog) register(k holdKey, lease time.Duration, renew bool, basis time.Time, cancel func(error)) (*entry, uint64) {
	w.start.Do(func() {
		w.wg.Add(1)
		go w.run()
		if w.l.single != nil {
			w.wg.Add(1)
			go w.listen()
		}
	})
	w.mu.Lock()
	e, ok := w.entries[k]
	if !ok {
		w.nextID++
		e = &entry{id: w.nextID, holds: map[uint64]func(error){}, lost: make(chan struct{})}
		w.entries[k] = e
	}
	w.nextID++
	hid := w.nextID
	e.holds[hid] = cancel
	e.lease = lease
	e.renew = e.renew || renew
	e.validUntil = validUntil(basis, lease)
	e.due = renewDue(basis, lease)
	w.mu.Unlock()
	poke(w.wake)
	poke(w.keysWake)
	return e, hid
}

// unregister: a Hold was released.
func (w *watchdog) unregister(k holdKey, e *entry, hid uint64) {
	w.mu.Lock()
	cancel := e.holds[hid]
	delete(e.holds, hid)
	if len(e.holds) == 0 && w.entries[k] == e {
		delete(w.entries, k)
	}
	w.mu.Unlock()
	if cancel != nil {
		cancel(errReleased)
	}
	poke(w.keysWake)
}

// renewed: a renewal sent at basis succeeded.
func (w *watchdog) renewed(k holdKey, e *entry, basis time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v := validUntil(basis, e.lease); v.After(e.validUntil) {
		e.validUntil = v
	}
	e.due = renewDue(basis, e.lease)
}

// markLost tells every Hold of the entry, once.
func (w *watchdog) markLost(k holdKey, e *entry, reason string) {
	w.mu.Lock()
	if e.err != nil {
		w.mu.Unlock()
		return
	}
	e.err = newError(ErrLost, k.key, reason)
	if w.entries[k] == e {
		delete(w.entries, k)
	}
	cancels := make([]func(error), 0, len(e.holds))
	for _, c := range e.holds {
		cancels = append(cancels, c)
	}
	err := e.err
	w.mu.Unlock()
	// Contexts first, so that whoever sees Lost() closed sees them cancelled too.
	for _, c := range cancels {
		c(err)
	}
	close(e.lost)
	poke(w.keysWake)
}

// lostErr is the loss, under the watchdog's lock (mu), nil while the hold is good.
func (e *entry) lostErr(mu *sync.Mutex) error {
	mu.Lock()
	defer mu.Unlock()
	return e.err
}

type dueHold struct {
	k     holdKey
	e     *entry
	check bool // a fixed-lease hold to look at (HEXISTS), not renew
}

// collect declares lost the holds whose lease ran out and picks what to send now; next is
// when to look again.
func (w *watchdog) collect(now time.Time) (due []dueHold, expired []dueHold, next time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	next = now.Add(time.Minute)
	// When one renewal is due, those due within a sixth of their lease go with it, so that
	// holds taken close together settle into one pipeline per tick.
	anyDue := false
	for _, e := range w.entries {
		if e.renew && !now.Before(e.due) {
			anyDue = true
			break
		}
	}
	for k, e := range w.entries {
		if !now.Before(e.validUntil) {
			expired = append(expired, dueHold{k: k, e: e})
			continue
		}
		switch {
		case e.checkNow:
			e.checkNow = false
			due = append(due, dueHold{k: k, e: e, check: !e.renew})
			if e.renew {
				e.due = now.Add(retryAfter(e.lease))
			}
		case e.renew && anyDue && !now.Add(e.lease/6).Before(e.due):
			due = append(due, dueHold{k: k, e: e})
			e.due = now.Add(retryAfter(e.lease)) // until the reply moves it on
		}
		if e.renew && e.due.Before(next) {
			next = e.due
		}
		if e.validUntil.Before(next) {
			next = e.validUntil
		}
	}
	return due, expired, next
}

func (w *watchdog) run() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		due, expired, next := w.collect(now)
		for _, x := range expired {
			w.markLost(x.k, x.e, "the lease ran out before a renewal was acknowledged")
		}
		if len(due) > 0 {
			w.renewBatch(due)
			continue
		}
		timer.Reset(time.Until(next))
		select {
		case <-w.quit:
			return
		case <-w.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

// renewBatch sends the due renewals (and checks) as one pipeline per node.
func (w *watchdog) renewBatch(due []dueHold) {
	l := w.l
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.responseTimeout)
	defer cancel()
	byNode := map[*node][]dueHold{}
	for _, d := range due {
		n, err := l.nodeFor(ctx, d.k.key)
		if err != nil {
			continue
		}
		byNode[n] = append(byNode[n], d)
	}
	for n, list := range byNode {
		cmds := make([][]any, len(list))
		for i, d := range list {
			switch {
			case d.check:
				cmds[i] = []any{"HEXISTS", d.k.key, field(d.k.owner, d.k.side)}
			case d.k.permit:
				cmds[i] = permitRenewArgs(d.k.key, d.k.owner, d.e.lease)
			default:
				cmds[i] = renewArgs(d.k.key, d.k.owner, d.k.side, d.e.lease, newRequestID())
			}
		}
		basis := time.Now()
		w.mu.Lock()
		w.ticks++
		w.renewals += len(list)
		w.mu.Unlock()
		replies, err := sendPipe(ctx, n.short, cmds)
		if err != nil {
			continue // tried again at retryAfter; the lease's end makes it lost
		}
		for i, d := range list {
			r := replies[i]
			if l.cluster != nil && askedTo(r.err) != "" {
				// The slot is moving and the key is on the node the ASK names: renewed there
				// (the same REQ id; pipe follows the ASK).
				if again, err := l.do(ctx, d.k.key, true, cmds[i]...); err == nil {
					r = again
				}
			}
			if r.err != nil && l.cluster != nil && movedTo(r.err) {
				l.cluster.ReloadState(ctx) // the slot moved: routed anew at the retry
				continue
			}
			switch renewal(r) {
			case renewLost:
				w.markLost(d.k, d.e, "the server no longer has the hold: it expired, was deleted, force-released or written over")
			case renewed:
				if !d.check {
					w.renewed(d.k, d.e, basis)
				}
			}
		}
	}
}

// checkKey looks at the holds on key at once (a keyspace event said it may have changed).
func (w *watchdog) checkKey(key string) {
	w.mu.Lock()
	found := false
	for k, e := range w.entries {
		if k.key == key {
			e.checkNow = true
			found = true
		}
	}
	w.mu.Unlock()
	if found {
		poke(w.wake)
	}
}

func (w *watchdog) heldKeys() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := map[string]bool{}
	for k := range w.entries {
		keys[k.key] = true
	}
	return keys
}

func (w *watchdog) stop() {
	close(w.quit)
	w.wg.Wait()
}

// counts: renewal pipelines and renewals sent so far.
func (w *watchdog) counts() (ticks, renewals int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ticks, w.renewals
}

// listen follows the module's keyspace events on the held keys (one pub/sub connection per
// Locks, on a single server), so that loss is told within a round trip of the event. It
// rereads notify-keyspace-events every 10 s and whenever the held keys change.
func (w *watchdog) listen() {
	defer w.wg.Done()
	l := w.l
	var ps *redis.PubSub
	var msgs <-chan *redis.Message
	source := ""
	subscribed := map[string]bool{}
	db := l.single.Options().DB
	var checked time.Time
	defer func() {
		if ps != nil {
			_ = ps.Close()
		}
	}()
	recheck := time.NewTicker(10 * time.Second)
	defer recheck.Stop()
	sync := func() {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.responseTimeout)
		defer cancel()
		if ps == nil && time.Since(checked) < time.Second {
			return // events were off a moment ago: no need to look at every hold
		}
		keys := w.heldKeys()
		if len(keys) == 0 && ps == nil {
			return
		}
		if time.Since(checked) > 10*time.Second || (ps == nil && len(keys) > 0 && time.Since(checked) > time.Second) {
			checked = time.Now()
			n, err := l.nodeFor(ctx, "")
			if err != nil {
				return
			}
			v, err := n.short.ConfigGet(ctx, "notify-keyspace-events").Result()
			want := ""
			if err == nil {
				want = eventSource(v["notify-keyspace-events"])
			}
			if want != source && ps != nil {
				_ = ps.Close()
				ps, msgs, subscribed = nil, nil, map[string]bool{}
			}
			source = want
			if source != "" && ps == nil {
				ps = n.short.Subscribe(ctx)
				msgs = ps.Channel()
				if source == keyeventMode {
					if ps.Subscribe(ctx, eventChannels(keyeventMode, db, nil)...) != nil {
						_ = ps.Close()
						ps, msgs = nil, nil
					}
				}
			}
		}
		if ps == nil || source != keyspaceMode {
			return
		}
		var add, drop []string
		for k := range keys {
			if !subscribed[k] {
				add = append(add, eventChannels(keyspaceMode, db, []string{k})...)
				subscribed[k] = true
			}
		}
		for k := range subscribed {
			if !keys[k] {
				drop = append(drop, eventChannels(keyspaceMode, db, []string{k})...)
				delete(subscribed, k)
			}
		}
		if len(add) > 0 {
			_ = ps.Subscribe(ctx, add...)
		}
		if len(drop) > 0 {
			_ = ps.Unsubscribe(ctx, drop...)
		}
	}
	for {
		select {
		case <-w.quit:
			return
		case <-w.keysWake:
			sync()
		case <-recheck.C:
			sync()
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			if key, ok := lostKey(db, m.Channel, m.Payload); ok {
				w.checkKey(key)
			}
		}
	}
}
