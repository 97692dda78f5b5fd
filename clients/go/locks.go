package rlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locks is the entry point: the locks on one server or one cluster, reached through the
// application's go-redis client. It owns its own connections (made from the client's
// options with go-redis's retries off), one watchdog goroutine, and the pool of connections
// that waits block on. Safe for concurrent use. Close it when done.
type Locks struct {
	single  *redis.Client
	cluster *redis.ClusterClient
	initErr error
	cfg     config

	clientID  string
	nextOwner atomic.Uint64

	mu       sync.Mutex
	closing  bool
	nodes    map[string]*node
	replicas map[string]replicaCount

	wd     *watchdog
	closed chan struct{}
	once   sync.Once
	bg     sync.WaitGroup // background work (late replies, observers) that Close waits for
}

type config struct {
	watchdogLease   time.Duration
	responseTimeout time.Duration
	idle            int
	durable         int
	durableTimeout  time.Duration
}

type replicaCount struct {
	n       int
	at      time.Time
	reading bool
}

// LocksOption configures a Locks.
type LocksOption func(*config)

// WithWatchdogLease is the lease of holds taken without Lease; the watchdog renews them
// every third of it. Default 30 s.
func WithWatchdogLease(d time.Duration) LocksOption {
	return func(c *config) {
		if d > 0 {
			c.watchdogLease = d
		}
	}
}

// WithResponseTimeout is how long a command without a wait may take. Default 2 s.
func WithResponseTimeout(d time.Duration) LocksOption {
	return func(c *config) {
		if d > 0 {
			c.responseTimeout = d
		}
	}
}

// WithSyncReplicas is the default acknowledgement of a grant: when the lock's primary has
// replicas, an acquire returns only once n of them (at most as many as are attached)
// acknowledged it (WAIT) within timeout. n = 0 turns it off. Default 1 within 1 s, as
// Redisson's checkLockSyncedSlaves.
func WithSyncReplicas(n int, timeout time.Duration) LocksOption {
	return func(c *config) {
		if n >= 0 {
			c.durable = n
		}
		if timeout > 0 {
			c.durableTimeout = timeout
		}
	}
}

// New makes the locks on the server or cluster rdb reaches: a *redis.Client (a failover
// client too), a *redis.ClusterClient, or a redis.UniversalClient holding either. It
// connects on first use. A nil client is not a panic: every call then returns
// ErrInvalidArgument.
func New(rdb redis.UniversalClient, opts ...LocksOption) *Locks {
	cfg := config{watchdogLease: 30 * time.Second, responseTimeout: 2 * time.Second, idle: 16, durable: 1, durableTimeout: time.Second}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	l := &Locks{cfg: cfg, clientID: newUUID(), nodes: map[string]*node{}, replicas: map[string]replicaCount{}, closed: make(chan struct{})}
	switch c := rdb.(type) {
	case nil:
		l.initErr = invalid("", "a nil go-redis client")
	case *redis.Client:
		l.single = c
	case *redis.ClusterClient:
		l.cluster = c
	default:
		l.initErr = invalid("", fmt.Sprintf("unsupported go-redis client %T: use *redis.Client or *redis.ClusterClient", rdb))
	}
	if l.initErr == nil && reflect.ValueOf(rdb).IsNil() {
		l.single, l.cluster = nil, nil
		l.initErr = invalid("", "a nil go-redis client")
	}
	l.wd = newWatchdog(l)
	return l
}

// newUUID is a random version-4 UUID: the first half of every owner id this Locks makes.
func newUUID() string {
	h := newRequestID()
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

// ClientID is this Locks' uuid, the first half of every owner id it makes.
func (l *Locks) ClientID() string { return l.clientID }

func (l *Locks) newOwner() string {
	return fmt.Sprintf("%s:%d", l.clientID, l.nextOwner.Add(1))
}

// Close stops the watchdog (holds are no longer renewed: they end with their lease) and
// closes the connections this Locks opened, those Session holds live on too (closing the
// pool closes them): the server ends those holds at once. This is the Java and Node
// clients' close: a hold is released by Release (or Do), not by Close. The application's
// client stays open.
func (l *Locks) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.mu.Lock()
		l.closing = true
		l.mu.Unlock()
		l.wd.stop()
		l.bg.Wait()
		l.mu.Lock()
		nodes := l.nodes
		l.nodes = map[string]*node{}
		l.mu.Unlock()
		for _, n := range nodes {
			n.close()
		}
	})
	return nil
}

// usableFor is usable for a handle whose options were refused with handleErr (nil when fine):
// that error first, before anything is sent.
func (l *Locks) usableFor(ctx context.Context, handleErr error) error {
	if handleErr != nil {
		return handleErr
	}
	return l.usable(ctx)
}

func (l *Locks) usable(ctx context.Context) error {
	if l == nil {
		return invalid("", "a nil *Locks")
	}
	if ctx == nil {
		return invalid("", "a nil context")
	}
	if l.initErr != nil {
		return l.initErr
	}
	select {
	case <-l.closed:
		return ErrClosed
	default:
	}
	return nil
}

// node is one server: a short-command client and a blocking client, both made from the
// application's options with go-redis's retries off (a resent RLOCK.ACQUIRE re-enters).
type node struct {
	addr  string
	short *redis.Client
	block *redis.Client
	mu    sync.Mutex
	idle  []*dedicated
	max   int
}

// dedicated is one connection that a wait blocks on, and its CLIENT ID.
type dedicated struct {
	conn *redis.Conn
	id   int64
}

// reinit undoes go-redis's option normalisation, so that copied options mean the same.
func reinit(d time.Duration) time.Duration {
	switch d {
	case 0:
		return -1
	case -1:
		return -2
	}
	return d
}

func newNode(opt *redis.Options, responseTimeout time.Duration, idle int) *node {
	short := *opt
	short.MaxRetries = -1
	short.ReadTimeout = responseTimeout
	short.WriteTimeout = responseTimeout
	block := *opt
	block.MaxRetries = -1
	block.ReadTimeout = -1 // no timeout: the server's null, not the client, ends a wait
	block.WriteTimeout = reinit(opt.WriteTimeout)
	block.ContextTimeoutEnabled = true // a wait's own deadline (wait + response timeout) bounds it
	block.PoolSize = 10000
	block.PoolTimeout = responseTimeout
	block.MinIdleConns = 0
	block.MaxIdleConns = 0
	return &node{addr: opt.Addr, short: redis.NewClient(&short), block: redis.NewClient(&block), max: idle}
}

func (n *node) close() {
	n.mu.Lock()
	idle := n.idle
	n.idle = nil
	n.mu.Unlock()
	for _, d := range idle {
		_ = d.conn.Close()
	}
	_ = n.short.Close()
	_ = n.block.Close()
}

// take is an idle dedicated connection, or a new one (with its CLIENT ID read).
func (n *node) take(ctx context.Context) (*dedicated, error) {
	n.mu.Lock()
	if k := len(n.idle); k > 0 {
		d := n.idle[k-1]
		n.idle = n.idle[:k-1]
		n.mu.Unlock()
		return d, nil
	}
	n.mu.Unlock()
	conn := n.block.Conn()
	idctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.short.Options().ReadTimeout)
	defer cancel()
	id, err := conn.ClientID(idctx).Result()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return &dedicated{conn: conn, id: id}, nil
}

func (n *node) giveBack(d *dedicated) {
	n.mu.Lock()
	if len(n.idle) < n.max {
		n.idle = append(n.idle, d)
		d = nil
	}
	n.mu.Unlock()
	if d != nil {
		_ = d.conn.Close()
	}
}

// nodeFor is the node that serves key (in a cluster, its slot's primary).
func (l *Locks) nodeFor(ctx context.Context, key string) (*node, error) {
	var opt *redis.Options
	if l.single != nil {
		opt = l.single.Options()
	} else {
		c, err := l.cluster.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		opt = c.Options()
	}
	return l.nodeAt(opt), nil
}

func (l *Locks) nodeAt(opt *redis.Options) *node {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.nodes[opt.Addr]
	if !ok {
		n = newNode(opt, l.cfg.responseTimeout, l.cfg.idle)
		l.nodes[opt.Addr] = n
	}
	return n
}

// reply is one command's reply: a value, null, or a server error.
type reply struct {
	val   any
	isNil bool
	err   error
}

func replyOf(c *redis.Cmd) reply {
	v, err := c.Result()
	if errors.Is(err, redis.Nil) {
		return reply{isNil: true}
	}
	return reply{val: v, err: err}
}

// isServerError: the server answered (with an error); the connection is fine.
func isServerError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// askedTo is the node an ASK redirection names ("ASK slot host:port": the slot is moving
// and the key is on that node now), or "" for any other reply.
func askedTo(err error) string {
	if err == nil {
		return ""
	}
	f := strings.Fields(err.Error())
	if len(f) == 3 && f[0] == "ASK" {
		return f[2]
	}
	return ""
}

// nodeTo is the node a command on key goes to: the slot's primary, or the node an ASK
// redirection named (asked; "" when none), reached with the options of the slot's primary.
func (l *Locks) nodeTo(ctx context.Context, key, asked string) (*node, error) {
	if asked == "" || l.cluster == nil {
		return l.nodeFor(ctx, key)
	}
	c, err := l.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	opt := *c.Options()
	opt.Addr = asked
	return l.nodeAt(&opt), nil
}

// sendTo is sendPipe, after an ASK redirection (asked) with ASKING before each command (it
// holds for the next command only); the replies are the commands' own.
func sendTo(ctx context.Context, c redis.Cmdable, cmds [][]any, asked bool) ([]reply, error) {
	if !asked {
		return sendPipe(ctx, c, cmds)
	}
	with := make([][]any, 0, 2*len(cmds))
	for _, cmd := range cmds {
		with = append(with, []any{"ASKING"}, cmd)
	}
	r, err := sendPipe(ctx, c, with)
	if err != nil {
		return nil, err
	}
	out := make([]reply, len(cmds))
	for i := range out {
		out[i] = r[2*i+1]
	}
	return out, nil
}

// movedTo reads a cluster redirection (MOVED / ASK): the server ran nothing.
func movedTo(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "TRYAGAIN")
}

// pipe sends cmds to key's node in one round trip. With resend, a pipeline whose connection
// broke is sent once more (every command in it carries a REQ id or only reads). A cluster
// redirection reloads the slots and goes again.
func (l *Locks) pipe(ctx context.Context, key string, resend bool, cmds ...[]any) ([]reply, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	var out []reply
	var err error
	asked := ""
	for attempt := 0; attempt < 4; attempt++ {
		var n *node
		n, err = l.nodeTo(ctx, key, asked)
		if err != nil {
			return nil, err
		}
		// Not ctx itself: go-redis counts a dial cut by a context as a failed dial, and after
		// a few it fails every dial for a while. The response timeout bounds the call.
		out, err = sendTo(context.WithoutCancel(ctx), n.short, cmds, asked != "")
		switch {
		case err == nil && l.cluster != nil && len(out) > 0 && askedTo(out[0].err) != "":
			asked = askedTo(out[0].err)
			continue
		case err == nil && l.cluster != nil && len(out) > 0 && movedTo(out[0].err):
			asked = ""
			l.cluster.ReloadState(ctx)
			if strings.HasPrefix(out[0].err.Error(), "TRYAGAIN") {
				time.Sleep(25 * time.Millisecond)
			}
			continue
		case err != nil && resend && attempt == 0 && isNetworkError(err):
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return out, err
	}
	return out, err
}

func sendPipe(ctx context.Context, c redis.Cmdable, cmds [][]any) ([]reply, error) {
	p := c.Pipeline()
	rcs := make([]*redis.Cmd, len(cmds))
	for i, a := range cmds {
		rcs[i] = p.Do(ctx, a...)
	}
	_, err := p.Exec(ctx)
	if err != nil && !isServerError(err) && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]reply, len(cmds))
	for i, c := range rcs {
		out[i] = replyOf(c)
	}
	return out, nil
}

// do sends one command to key's node (see pipe).
func (l *Locks) do(ctx context.Context, key string, resend bool, args ...any) (reply, error) {
	r, err := l.pipe(ctx, key, resend, args)
	if err != nil {
		return reply{}, err
	}
	return r[0], nil
}

// doValue is do with a server error returned as the error.
func (l *Locks) doValue(ctx context.Context, key string, resend bool, args ...any) (any, bool, error) {
	r, err := l.do(ctx, key, resend, args...)
	if err != nil {
		return nil, false, err
	}
	return r.val, r.isNil, r.err
}

// blocking is a command that may wait in the server: its pipeline (the first command is
// the one that blocks), the command names it may be blocked in, and its wait.
type blocking struct {
	key   string
	cmds  [][]any
	names []string
	wait  waitSpec
	extra time.Duration // what the pipeline may take beyond the wait (a WAIT)
	// keep, when set, takes the connection of a granted call instead of the idle pool: a
	// SESSION hold lives as long as its connection.
	keep func(n *node, d *dedicated)
}

// sent is what came back from a blocking call: the replies, or the connection's error (then
// no reply could be read: go-redis fails a whole pipeline whose connection broke).
type sent struct {
	replies []reply
	err     error
}

// callBlocking sends b on a dedicated connection and returns its replies. If ctx ends
// first, the wait is ended so that nothing stays held: when the server shows the request
// blocked, CLIENT KILL (sent on another connection) ends it, and the server forgets the
// waiter and gives back a grant it could not deliver; a reply that came anyway is handed
// to undo (read=true), and when the replies could not be read undo gets read=false (then
// the caller learns the outcome from the request's REQ id). undo runs before this returns.
func (l *Locks) callBlocking(ctx context.Context, b blocking, undo func(replies []reply, read bool)) ([]reply, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	b.cmds = append([][]any(nil), b.cmds...)
	started := time.Now()
	asked := ""
	for attempt := 0; ; attempt++ {
		n, err := l.nodeTo(ctx, b.key, asked)
		if err != nil {
			return nil, err
		}
		d, err := n.take(ctx)
		if err != nil {
			return nil, err
		}
		done := make(chan sent, 1)
		go func(cmds [][]any) {
			rctx := context.Background()
			if !b.wait.forever {
				var cancel context.CancelFunc
				rctx, cancel = context.WithTimeout(rctx, b.wait.d+b.extra+l.cfg.responseTimeout)
				defer cancel()
			}
			r, err := sendTo(rctx, d.conn, cmds, asked != "")
			done <- sent{replies: r, err: err}
		}(b.cmds)
		select {
		case s := <-done:
			if s.err != nil {
				_ = d.conn.Close()
				// The connection was cut (CLIENT KILL, a restart, a proxy): the same call
				// again, with its REQ id, on a new one, for the wait that is left. The server
				// replies the first reply if it granted, and does not grant twice.
				left, ok := b.wait.left(time.Since(started))
				if attempt < 2 && ok && isNetworkError(s.err) && !isTimeout(s.err) && ctx.Err() == nil {
					b.cmds[0] = blockArgsReplaced(b.cmds[0], left)
					time.Sleep(50 * time.Millisecond)
					continue
				}
				return nil, s.err
			}
			if b.keep != nil && len(s.replies) > 0 && s.replies[0].err == nil && !s.replies[0].isNil {
				b.keep(n, d)
			} else {
				n.giveBack(d)
			}
			// Redirections are followed for as long as the wait lasts (as the Rust client
			// does): while a slot moves, a waiter on the importing node is sent back with
			// MOVED by the module's slot check (every 250 ms), and the old node ASKs again.
			if l.cluster != nil && len(s.replies) > 0 && movedTo(s.replies[0].err) {
				left, ok := b.wait.left(time.Since(started))
				if !ok {
					s.replies[0] = reply{isNil: true}
					return s.replies, nil
				}
				// An ASK: this key is on the node it names while its slot moves; a MOVED: the
				// slot has moved (or TRYAGAIN: its keys are split), and the slots are read
				// again, a moment later.
				if asked = askedTo(s.replies[0].err); asked == "" {
					l.cluster.ReloadState(ctx)
					time.Sleep(25 * time.Millisecond)
				}
				b.cmds[0] = blockArgsReplaced(b.cmds[0], left)
				continue
			}
			return s.replies, nil
		case <-ctx.Done():
			l.cancelWait(n, d, b.names, done, undo)
			return nil, fmt.Errorf("%w: %w", ErrNotAcquired, ctx.Err())
		}
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout() || errors.Is(err, context.DeadlineExceeded)
}

// blockArgsReplaced is args with its BLOCK value set to what is left of the wait.
func blockArgsReplaced(args []any, left waitSpec) []any {
	out := append([]any(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if s, ok := out[i].(string); ok && s == "BLOCK" {
			if left.forever {
				out[i+1] = int64(0)
			} else {
				out[i+1] = millis(left.d)
			}
		}
	}
	return out
}

// cancelWait ends a wait the caller gave up (see callBlocking). CLIENT UNBLOCK is never
// sent: before Redis 7.4 it does not unblock module waits, and during CLIENT PAUSE it can
// run the command later.
func (l *Locks) cancelWait(n *node, d *dedicated, names []string, done chan sent, undo func([]reply, bool)) {
	ctx := context.Background()
	finish := func(s sent, ok bool) {
		_ = d.conn.Close()
		if ok && s.err == nil {
			undo(s.replies, true)
		} else {
			l.awaitGone(n, d.id)
			undo(nil, false)
		}
	}
	// The server closes the connection after what it wrote to it, which is read here.
	killAndRead := func() {
		_ = n.short.Do(ctx, "CLIENT", "KILL", "ID", d.id).Err()
		select {
		case s := <-done:
			finish(s, true)
		case <-time.After(3 * time.Second):
			l.later(func() { <-done })
			finish(sent{}, false)
		}
	}
	giveUp := time.Now().Add(3 * time.Second)
	for time.Now().Before(giveUp) {
		line, err := n.short.Do(ctx, "CLIENT", "LIST", "ID", d.id).Text()
		if err == nil && clientBlockedIn(line, names...) {
			killAndRead()
			return
		}
		select {
		case s := <-done:
			if s.err == nil {
				n.giveBack(d)
				undo(s.replies, true)
				return
			}
			finish(s, true)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	killAndRead()
}

// awaitGone waits (up to 3 s) until the server has dropped client id, so that a wait on it
// can no longer be granted.
func (l *Locks) awaitGone(n *node, id int64) {
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		line, err := n.short.Do(context.Background(), "CLIENT", "LIST", "ID", id).Text()
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			return
		}
		if strings.TrimSpace(line) == "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// later runs f in the background; Close waits for it. False (and f does not run) once
// Close has begun.
func (l *Locks) later(f func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return false
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		f()
	}()
	return true
}

// takeCall sends a call that takes something (permits, several locks) with REQ id req,
// waiting in the server when w blocks. Given up during a wait, what it took is given back by
// giveBack: the reply read, or the reply of once (the same call without BLOCK, same REQ
// id) when the connection's replies were lost.
func (l *Locks) takeCall(ctx context.Context, key string, args, once []any, names []string, w waitSpec,
	giveBack func(ctx context.Context, r reply)) (reply, error) {
	var r []reply
	var err error
	if w.blocks() {
		b := blocking{key: key, cmds: [][]any{args}, names: names, wait: w}
		r, err = l.callBlocking(ctx, b, func(rs []reply, read bool) {
			uctx, cancel := context.WithTimeout(context.Background(), 3*l.cfg.responseTimeout)
			defer cancel()
			if !read {
				rs, _ = l.pipe(uctx, key, true, once)
			}
			if len(rs) > 0 && rs[0].err == nil && !rs[0].isNil {
				giveBack(uctx, rs[0])
			}
		})
	} else {
		r, err = l.pipe(ctx, key, true, args)
	}
	if err != nil {
		return reply{}, err
	}
	return r[0], nil
}

// replicasOf is how many replicas key's primary has online, read with INFO replication. The
// count is kept: once older than a second it is read again in the background, so only the
// first acquire on a node waits for it.
func (l *Locks) replicasOf(ctx context.Context, key string) (int, error) {
	n, err := l.nodeFor(ctx, key)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	known, ok := l.replicas[n.addr]
	stale := ok && time.Since(known.at) >= time.Second && !known.reading
	if stale {
		known.reading = true
		l.replicas[n.addr] = known
	}
	l.mu.Unlock()
	if stale {
		l.later(func() { _, _ = l.readReplicas(context.Background(), n) })
	}
	if ok {
		return known.n, nil
	}
	return l.readReplicas(ctx, n)
}

func (l *Locks) readReplicas(ctx context.Context, n *node) (int, error) {
	info, err := n.short.Info(context.WithoutCancel(ctx), "replication").Result()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if known, ok := l.replicas[n.addr]; ok {
			known.reading = false
			l.replicas[n.addr] = known
		}
		return 0, err
	}
	count := onlineReplicas(info)
	l.replicas[n.addr] = replicaCount{n: count, at: time.Now()}
	return count, nil
}

func (l *Locks) staleReplicas() {
	l.mu.Lock()
	l.replicas = map[string]replicaCount{}
	l.mu.Unlock()
}
