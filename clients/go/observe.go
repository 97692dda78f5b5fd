package rlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// observe is Observe's background work: it reads the leader (RLOCK.INFO) and sends each
// change on out, reading again when a message says the holder may have changed, or when
// observeWait ends. It returns when ctx ends or the Locks is closed.
func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	w := &leaderWatch{l: e.l, key: e.name}
	defer w.close()
	var last *Leader
	for {
		w.refresh(ctx)
		// Read after subscribing: a change after this read comes with a message.
		info, err := e.l.Info(ctx, e.name)
		pttl := int64(-2)
		if err == nil {
			pttl = info.PTTL
			if cur, _ := leaderOf(info); last == nil || *last != cur {
				last = &cur
				select {
				case out <- cur:
				case <-ctx.Done():
					return
				case <-e.l.closed:
					return
				}
			}
		}
		if !w.wait(ctx, observeWait(w.events(), pttl)) {
			return
		}
	}
}

// leaderWatch is an observer's subscription: to the channels that announce changes of key's
// holder, chosen by observeSource. None in a cluster (keyspace events are per node), or when
// subscribing failed: then the observer polls.
type leaderWatch struct {
	l       *Locks
	key     string
	source  string
	ps      *redis.PubSub
	msgs    <-chan *redis.Message
	checked time.Time
}

// events tells whether the watch follows the module's events (then the observer reads
// seldom), not the unlock channel or nothing (then it polls).
func (w *leaderWatch) events() bool {
	return w.msgs != nil && (w.source == keyspaceMode || w.source == keyeventMode)
}

// refresh reads notify-keyspace-events, once a second at most, and subscribes to what it
// lets the observer hear, if that changed (or the subscription was lost).
func (w *leaderWatch) refresh(ctx context.Context) {
	if w.l.single == nil || time.Since(w.checked) < observeRecheck {
		return
	}
	w.checked = time.Now()
	ctx, cancel := context.WithTimeout(ctx, w.l.cfg.responseTimeout)
	defer cancel()
	n, err := w.l.nodeFor(ctx, w.key)
	if err != nil {
		return
	}
	flags := ""
	if v, err := n.short.ConfigGet(ctx, "notify-keyspace-events").Result(); err == nil {
		flags = v["notify-keyspace-events"]
	}
	source := observeSource(flags)
	if source == w.source && w.msgs != nil {
		return
	}
	w.close()
	w.source = source
	ps := n.short.Subscribe(ctx)
	// Subscribed once the server confirms: only then does the read that follows see every
	// change before it, and a message announce every change after it.
	if ps.Subscribe(ctx, observeChannels(source, w.l.single.Options().DB, w.key)...) != nil {
		_ = ps.Close()
		return
	}
	if _, err := ps.ReceiveTimeout(ctx, w.l.cfg.responseTimeout); err != nil {
		_ = ps.Close()
		return
	}
	w.ps, w.msgs = ps, ps.Channel()
}

// wait waits up to d for a message that may announce a change; false when ctx ends or the
// Locks is closed.
func (w *leaderWatch) wait(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-w.l.closed:
			return false
		case <-timer.C:
			return true
		case m, ok := <-w.msgs:
			if !ok {
				w.close() // the connection is gone: poll until refresh subscribes again
				return true
			}
			if observeMatters(w.source, w.key, m.Payload) {
				return true
			}
		}
	}
}

func (w *leaderWatch) close() {
	if w.ps != nil {
		_ = w.ps.Close()
	}
	w.ps, w.msgs = nil, nil
}
