package rlock

// C21: the shared vectors of clients/spec (see its README), every file, every case. Each case
// goes through what the calls themselves use: the handle built from the case's options with
// the public constructors, then the handle's plan (the commands it sends), the readers of
// replies.go and the error mapping, and the keyspace decisions of events.go. A refusal goes
// through the public call on a Locks whose server does not exist, so that a call that is not
// refused fails with a connection error, not ErrInvalidArgument. A case this client cannot
// express fails; nothing is skipped.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const specDir = "../spec"

type specCase struct {
	ID      string                     `json:"id"`
	Call    string                     `json:"call"`
	Args    map[string]json.RawMessage `json:"args"`
	Context struct {
		AttachedReplicas int `json:"attached_replicas"`
	} `json:"context"`
	Replies []json.RawMessage `json:"replies"`
	Error   string            `json:"error"`
	Expect  json.RawMessage   `json:"expect"`
}

type specFile struct {
	Format     *int       `json:"format"`
	LossEvents []string   `json:"loss_events"`
	Cases      []specCase `json:"cases"`
}

func TestC21_SharedVectors(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(specDir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no vectors at %s: %v", specDir, err)
	}
	checks := map[string]func(*testing.T, *specFile){
		"commands.json": checkCommands, "replies.json": checkReplies, "errors.json": checkErrors,
		"keyspace.json": checkKeyspace, "refusals.json": checkRefusals,
	}
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var doc specFile
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if doc.Format == nil || *doc.Format != 1 {
				t.Fatalf("%s is of a format this test does not know", name)
			}
			if len(doc.Cases) == 0 {
				t.Fatalf("%s has no cases", name)
			}
			check, ok := checks[name]
			if !ok {
				t.Fatalf("%s: a vector file this test does not know", name)
			}
			seen := map[string]bool{}
			for _, c := range doc.Cases {
				if seen[c.ID] {
					t.Errorf("%s: the id %s twice", name, c.ID)
				}
				seen[c.ID] = true
			}
			check(t, &doc)
		})
	}
}

// errRefused is an argument that Go's types cannot hold (a string for a lease, a number for
// a name): refused by the conversion, before any call.
var errRefused = errors.New("refused by the conversion into the client's argument type")

// specArgs converts a case's args as this client's types take them.
type specArgs map[string]json.RawMessage

func (a specArgs) has(k string) bool { _, ok := a[k]; return ok }

func (a specArgs) str(k string) (string, error) {
	raw, ok := a[k]
	if !ok {
		return "", fmt.Errorf("%w: %s missing", errRefused, k)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var rep struct {
		Repeat *string `json:"repeat"`
		Times  int     `json:"times"`
	}
	if json.Unmarshal(raw, &rep) == nil && rep.Repeat != nil {
		return strings.Repeat(*rep.Repeat, rep.Times), nil
	}
	return "", fmt.Errorf("%w: %s is %s", errRefused, k, raw)
}

func (a specArgs) integer(k string) (int64, error) {
	var n int64
	if err := json.Unmarshal(a[k], &n); err != nil {
		return 0, fmt.Errorf("%w: %s is %s", errRefused, k, a[k])
	}
	return n, nil
}

func (a specArgs) ms(k string) (time.Duration, error) {
	n, err := a.integer(k)
	return time.Duration(n) * time.Millisecond, err
}

func (a specArgs) flag(k string) (bool, error) {
	var b bool
	if err := json.Unmarshal(a[k], &b); err != nil {
		return false, fmt.Errorf("%w: %s is %s", errRefused, k, a[k])
	}
	return b, nil
}

func (a specArgs) keys() ([]string, error) {
	var keys []string
	if err := json.Unmarshal(a["keys"], &keys); err != nil {
		return nil, fmt.Errorf("%w: keys %s", errRefused, a["keys"])
	}
	return keys, nil
}

// options are the handle options the args name: owner, lease, wait, fair, fenced, session,
// sync_replicas.
func (a specArgs) options() ([]Option, error) {
	var opts []Option
	if a.has("owner") {
		o, err := a.str("owner")
		if err != nil {
			return nil, err
		}
		opts = append(opts, Owner(o))
	}
	if a.has("lease_ms") {
		d, err := a.ms("lease_ms")
		if err != nil {
			return nil, err
		}
		opts = append(opts, Lease(d))
	}
	if a.has("wait_ms") {
		w, err := a.wait()
		if err != nil {
			return nil, err
		}
		opts = append(opts, w)
	}
	for name, opt := range map[string]Option{"fair": Fair(), "fenced": Fenced(), "session": Session()} {
		if !a.has(name) {
			continue
		}
		on, err := a.flag(name)
		if err != nil {
			return nil, err
		}
		if on {
			opts = append(opts, opt)
		}
	}
	if a.has("sync_replicas") {
		var sync struct {
			N         *int `json:"n"`
			TimeoutMs *int `json:"timeout_ms"`
		}
		if err := json.Unmarshal(a["sync_replicas"], &sync); err != nil || sync.N == nil || sync.TimeoutMs == nil {
			return nil, fmt.Errorf("%w: sync_replicas %s", errRefused, a["sync_replicas"])
		}
		opts = append(opts, SyncReplicas(*sync.N), SyncTimeout(time.Duration(*sync.TimeoutMs)*time.Millisecond))
	}
	return opts, nil
}

func (a specArgs) wait() (Option, error) {
	var s string
	if json.Unmarshal(a["wait_ms"], &s) == nil && s == "forever" {
		return WaitForever(), nil
	}
	d, err := a.ms("wait_ms")
	return Wait(d), err
}

// waitOnly is the wait option alone (a semaphore's, a latch's, an election's).
func (a specArgs) waitOnly() ([]Option, error) {
	if !a.has("wait_ms") {
		return nil, nil
	}
	w, err := a.wait()
	return []Option{w}, err
}

// nowhere is a Locks on a server that does not exist: nothing can be sent.
func nowhere(t *testing.T) *Locks {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: time.Second})
	l := New(rdb)
	t.Cleanup(func() { _ = l.Close(); _ = rdb.Close() })
	return l
}

// lockOf is the lock handle a case describes (a side of a read-write lock with side).
func lockOf(l *Locks, a specArgs) (*Lock, error) {
	key, err := a.str("key")
	if err != nil {
		return nil, err
	}
	opts, err := a.options()
	if err != nil {
		return nil, err
	}
	if !a.has("side") {
		return l.Lock(key, opts...), nil
	}
	side, err := a.str("side")
	if err != nil {
		return nil, err
	}
	switch side {
	case "read":
		return l.RWLock(key, opts...).Read(), nil
	case "write":
		return l.RWLock(key, opts...).Write(), nil
	}
	return nil, fmt.Errorf("%w: side %q", errRefused, side)
}

func multiOf(l *Locks, a specArgs) (*MultiLock, error) {
	keys, err := a.keys()
	if err != nil {
		return nil, err
	}
	opts, err := a.options()
	if err != nil {
		return nil, err
	}
	return l.MultiLock(keys, opts...), nil
}

// keyAndWait are the key and the wait option (if any) of a semaphore's, a latch's or an
// election's case. On an error the handle made from them is not used.
func keyAndWait(a specArgs) (string, []Option, error) {
	key, err := a.str("key")
	if err != nil {
		return "", nil, err
	}
	opts, err := a.waitOnly()
	return key, opts, err
}

func semaphoreOf(l *Locks, a specArgs) (*Semaphore, error) {
	key, opts, err := keyAndWait(a)
	return l.Semaphore(key, opts...), err
}

func permitsOf(l *Locks, a specArgs) (*PermitExpirableSemaphore, error) {
	key, opts, err := keyAndWait(a)
	if err != nil || !a.has("lease_ms") {
		return l.PermitExpirableSemaphore(key, opts...), err
	}
	d, err := a.ms("lease_ms")
	return l.PermitExpirableSemaphore(key, append(opts, Lease(d))...), err
}

func latchOf(l *Locks, a specArgs) (*CountDownLatch, error) {
	key, opts, err := keyAndWait(a)
	return l.CountDownLatch(key, opts...), err
}

func electionOf(l *Locks, a specArgs) (*Election, error) {
	key, opts, err := keyAndWait(a)
	return l.Election(key, opts...), err
}

// usableHandle fails a case whose handle this client refused though the case is valid.
func usableHandle(err error) error {
	if err != nil {
		return fmt.Errorf("the handle was refused: %w", err)
	}
	return nil
}

// usableOf reads a case's handle with open, and gives it only if its options were accepted too
// (the error it would stop at before sending anything, as usableHandle wraps it).
func usableOf[H any](open func(*Locks, specArgs) (H, error), refused func(H) error) func(*Locks, specArgs) (H, error) {
	return func(l *Locks, a specArgs) (H, error) {
		h, err := open(l, a)
		if err != nil {
			return h, err
		}
		return h, usableHandle(refused(h))
	}
}

var (
	usableLockOf      = usableOf(lockOf, func(k *Lock) error { return k.err })
	usableMultiOf     = usableOf(multiOf, func(m *MultiLock) error { return m.err })
	usableSemaphoreOf = usableOf(semaphoreOf, func(s *Semaphore) error { return s.err })
	usablePermitsOf   = usableOf(permitsOf, func(s *PermitExpirableSemaphore) error { return s.err })
)

// acquirePipeline is what an acquire of k sends when the key's primary has attached replicas.
func acquirePipeline(k *Lock, attached int, req string) ([][]any, error) {
	if err := usableHandle(k.err); err != nil {
		return nil, err
	}
	n, timeout := k.settle(attached)
	return k.plan().pipeline(req, n, timeout), nil
}

// sends is what a call sends (commands.json).
func sends(l *Locks, c specCase) ([][]any, error) {
	a := specArgs(c.Args)
	req := newRequestID()
	one := func(cmd []any, err error) ([][]any, error) {
		if err != nil {
			return nil, err
		}
		return [][]any{cmd}, nil
	}
	key := func() string { k, _ := a.str("key"); return k }
	count := func(k string) int {
		n, _ := a.integer(k)
		return int(n)
	}
	switch c.Call {
	case "lock.acquire", "lock.scoped", "lock.release", "lock.renew", "lock.is_held_by", "lock.hold_count":
		k, err := usableLockOf(l, a)
		if err != nil {
			return nil, err
		}
		switch c.Call {
		case "lock.acquire":
			return acquirePipeline(k, c.Context.AttachedReplicas, req)
		case "lock.scoped":
			return acquirePipeline(k.scoped(), c.Context.AttachedReplicas, req)
		case "lock.release":
			return one(k.releaseArgs(req), nil)
		case "lock.renew":
			return one(k.renewArgs(req), nil)
		case "lock.is_held_by":
			return one(k.heldArgs(), nil)
		default:
			return one(k.holdCountArgs(), nil)
		}
	case "lock.is_locked":
		return one(existsArgs(key()), nil)
	case "lock.remaining_lease":
		return one(pttlArgs(key()), nil)
	case "lock.force_release":
		return one(forceReleaseArgs(key()), nil)
	case "lock.info", "election.leader":
		return one(infoArgs(key()), nil)
	case "multi.acquire", "multi.scoped", "multi.release":
		m, err := usableMultiOf(l, a)
		if err != nil {
			return nil, err
		}
		switch c.Call {
		case "multi.acquire":
			return one(m.acquireArgs(req), nil)
		case "multi.scoped":
			return one(m.scoped().acquireArgs(req), nil)
		default:
			return one(m.releaseArgs(req), nil)
		}
	case "semaphore.try_set_permits", "permits.try_set_permits":
		return one(trySetPermitsArgs(key(), count("permits")), nil)
	case "semaphore.add_permits":
		return one(addPermitsArgs(key(), count("permits")), nil)
	case "semaphore.available":
		return one(availableArgs(key()), nil)
	case "semaphore.acquire", "semaphore.release":
		s, err := usableSemaphoreOf(l, a)
		if err != nil {
			return nil, err
		}
		if c.Call == "semaphore.acquire" {
			return one(semAcquireArgs(s.name, count("permits"), s.o.wait, req), nil)
		}
		return one(semReleaseArgs(s.name, count("permits"), req), nil)
	case "permits.acquire", "permits.renew", "permits.release":
		s, err := usablePermitsOf(l, a)
		if err != nil {
			return nil, err
		}
		id, _ := a.str("id")
		switch c.Call {
		case "permits.acquire":
			return one(semLeaseArgs(s.name, count("permits"), s.lease(), s.o.wait, req), nil)
		case "permits.renew":
			return one(permitRenewArgs(s.name, id, s.lease()), nil)
		default:
			return one(returnArgs(s.name, id, req), nil)
		}
	case "latch.try_set_count":
		n, err := a.integer("count")
		return one(trySetCountArgs(key(), n), err)
	case "latch.count_down":
		return one(countDownArgs(key()), nil)
	case "latch.count":
		return one(latchCountArgs(key()), nil)
	case "latch.await_zero":
		latch, err := latchOf(l, a)
		if err != nil {
			return nil, err
		}
		return one(latchAwaitArgs(latch.s.name, latch.s.o.wait), usableHandle(latch.s.err))
	case "election.campaign", "election.resign":
		e, err := electionOf(l, a)
		if err != nil {
			return nil, err
		}
		value, err := a.str("value")
		if err != nil {
			return nil, err
		}
		if c.Call == "election.campaign" {
			return acquirePipeline(e.lock(value), c.Context.AttachedReplicas, req)
		}
		// Leadership.Resign releases the campaign's hold.
		return one(e.lock(value).releaseArgs(req), nil)
	case "queries.waiters":
		return one(waitersArgs(key()), nil)
	case "queries.scan":
		match, _ := a.str("match")
		kind, _ := a.str("type")
		return one(scanArgs("0", match, kind), nil)
	case "queries.stats":
		return one(statsArgs(), nil)
	case "queries.top":
		return one(topArgs(count("count")))
	}
	return nil, fmt.Errorf("a call this test cannot express: %s", c.Call)
}

// words is a command as it goes on the wire: each argument as go-redis writes it.
func words(cmds [][]any) [][]string {
	out := make([][]string, len(cmds))
	for i, cmd := range cmds {
		for _, w := range cmd {
			out[i] = append(out[i], fmt.Sprint(w))
		}
	}
	return out
}

// agree checks got against want, binding {req}-style placeholders at their first use: the
// same placeholder is the same id, different ones are different ids.
func agree(t *testing.T, id string, got [][]string, wantRaw json.RawMessage) {
	t.Helper()
	var want [][]string
	if err := json.Unmarshal(wantRaw, &want); err != nil {
		t.Fatalf("%s: expect %s", id, wantRaw)
	}
	if len(got) != len(want) {
		t.Errorf("%s: sent %q, want %q", id, got, want)
		return
	}
	bound := map[string]string{}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Errorf("%s: sent %q, want %q", id, got[i], want[i])
			continue
		}
		for j, w := range want[i] {
			g := got[i][j]
			if !(strings.HasPrefix(w, "{req") && strings.HasSuffix(w, "}")) {
				if g != w {
					t.Errorf("%s: sent %q, want %q", id, got[i], want[i])
				}
				continue
			}
			if len(g) < 1 || len(g) > 64 || strings.ContainsAny(g, "{}") {
				t.Errorf("%s: %q is not a REQ id", id, g)
			}
			if v, ok := bound[w]; ok {
				if v != g {
					t.Errorf("%s: %s sent as two ids", id, w)
				}
				continue
			}
			for p, v := range bound {
				if v == g {
					t.Errorf("%s: %s is the id of %s", id, w, p)
				}
			}
			bound[w] = g
		}
	}
}

// eachExpressed runs check on what express makes of each case, with a Locks that can send
// nothing; a case express cannot make is an error of the test.
func eachExpressed[R any](t *testing.T, doc *specFile, express func(*Locks, specCase) (R, error), check func(c specCase, r R)) {
	l := nowhere(t)
	for _, c := range doc.Cases {
		r, err := express(l, c)
		if err != nil {
			t.Errorf("%s: cannot express: %v", c.ID, err)
			continue
		}
		check(c, r)
	}
}

// expected is a case's expect object.
func expected(t *testing.T, c specCase) map[string]any {
	var want map[string]any
	if err := json.Unmarshal(c.Expect, &want); err != nil {
		t.Fatalf("%s: expect %s", c.ID, c.Expect)
	}
	return want
}

func checkCommands(t *testing.T, doc *specFile) {
	eachExpressed(t, doc, sends, func(c specCase, cmds [][]any) { agree(t, c.ID, words(cmds), c.Expect) })
}

// specServerError is a server's error reply as go-redis returns it: a redis.Error.
type specServerError string

func (e specServerError) Error() string { return string(e) }
func (e specServerError) RedisError()   {}

var _ redis.Error = specServerError("")

// replyOfJSON is the README's JSON for RESP as go-redis gives it: null, int64, string, []any,
// map[any]any (RESP3), and an error reply as the reply's err.
func replyOfJSON(raw json.RawMessage) (reply, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return reply{}, err
	}
	if m, ok := v.(map[string]any); ok {
		if line, ok := m["error"].(string); ok {
			return reply{err: specServerError(line)}, nil
		}
	}
	if v == nil {
		return reply{isNil: true}, nil
	}
	val, err := respValue(v)
	return reply{val: val}, err
}

func respValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, string:
		return x, nil
	case json.Number:
		return x.Int64()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = respValue(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		pairs, ok := x["map"].([]any)
		if !ok {
			return nil, fmt.Errorf("not a reply: %v", x)
		}
		out := map[any]any{}
		for _, p := range pairs {
			kv, ok := p.([]any)
			if !ok || len(kv) != 2 {
				return nil, fmt.Errorf("not a pair: %v", p)
			}
			k, err := respValue(kv[0])
			if err != nil {
				return nil, err
			}
			if out[k], err = respValue(kv[1]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("not a reply: %v", v)
}

// class is an error as the README's table of error classes names it, with the data it
// carries.
func class(err error) map[string]any {
	var dl *DeadlockError
	var nh *NotHeldError
	var re redis.Error
	switch {
	case errors.As(err, &dl):
		cycle := []any{}
		for _, w := range dl.Cycle {
			cycle = append(cycle, map[string]any{"owner": w.Owner, "key": w.Key, "holder": w.Holder, "kept": w.Kept})
		}
		return map[string]any{"error": "Deadlock", "cycle": cycle}
	case errors.Is(err, ErrStaleToken):
		return map[string]any{"error": "StaleToken"}
	case errors.As(err, &nh):
		return map[string]any{"error": "NotHeld", "key": nh.Key, "owner": nh.Owner}
	case errors.Is(err, ErrNotHeld):
		return map[string]any{"error": "NotHeld"}
	case errors.Is(err, ErrLost):
		return map[string]any{"error": "Lost"}
	case errors.Is(err, ErrNotAcquired):
		return map[string]any{"error": "NotAcquired"}
	case errors.Is(err, ErrNotAcknowledged):
		return map[string]any{"error": "NotAcknowledged"}
	case errors.Is(err, ErrInvalidArgument):
		return map[string]any{"error": "InvalidArgument"}
	case errors.Is(err, ErrUnexpectedReply):
		return map[string]any{"error": "Unexpected"}
	case errors.As(err, &re):
		return map[string]any{"error": "ServerError", "code": serverCode(re.Error())}
	}
	return map[string]any{"error": fmt.Sprintf("unclassified %T: %v", err, err)}
}

// orNull is n, or JSON null when known is false.
func orNull[T any](n T, known bool) any {
	if !known {
		return nil
	}
	return n
}

// reads is what a call makes of its replies (replies.json), and what it sends next.
func reads(l *Locks, c specCase) (map[string]any, [][]any, error) {
	a := specArgs(c.Args)
	var rs []reply
	for _, raw := range c.Replies {
		r, err := replyOfJSON(raw)
		if err != nil {
			return nil, nil, err
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, nil, errors.New("no replies")
	}
	first := rs[0]
	key, _ := a.str("key")
	owner, _ := a.str("owner")
	// value is {name: v}, or the error's class.
	value := func(name string, v any, err error) map[string]any {
		if err != nil {
			return class(err)
		}
		return map[string]any{name: v}
	}
	switch c.Call {
	case "lock.acquire", "lock.scoped":
		k, err := lockOf(l, a)
		if err != nil {
			return nil, nil, err
		}
		if c.Call == "lock.scoped" {
			k = k.scoped()
		}
		if err := usableHandle(k.err); err != nil {
			return nil, nil, err
		}
		replicas, _ := k.settle(c.Context.AttachedReplicas)
		g, ok, err := readGrant(rs, k.o.fenced, replicas, k.name, k.o.owner)
		switch {
		case err != nil:
			return class(err), nil, nil
		case !ok && c.Call == "lock.scoped":
			// Do never runs its function: Acquire's ErrNotAcquired is its error.
			return class(newError(ErrNotAcquired, k.name, "")), nil, nil
		case !ok:
			// Go says "not granted" as Acquire's ErrNotAcquired, with a nil *Hold.
			return map[string]any{"granted": false}, nil, nil
		case !g.acknowledged(replicas):
			// Given back by Hold.Release, which sends the handle's release with a new REQ id.
			return class(newError(ErrNotAcknowledged, k.name, "")), [][]any{k.releaseArgs(newRequestID())}, nil
		}
		return map[string]any{"granted": true, "hold_count": orNull(g.count, g.count > 0),
			"token": orNull(g.token, k.o.fenced), "replicas_acked": orNull(g.acked, g.waited)}, nil, nil
	case "lock.release":
		freed, err := readRelease(first, key, owner)
		return value("freed", freed, err), nil, nil
	case "lock.renew", "watchdog.renewal":
		outcome := renewal(first)
		if c.Call == "watchdog.renewal" {
			return map[string]any{"outcome": map[renewOutcome]string{renewed: "renewed", renewLost: "lost", renewRetry: "retry"}[outcome]}, nil, nil
		}
		switch outcome {
		case renewed:
			return map[string]any{"renewed": true}, nil, nil
		case renewLost:
			return class(newError(ErrLost, key, "")), nil, nil
		}
		return class(first.err), nil, nil
	case "multi.acquire", "multi.scoped", "multi.release":
		m, err := usableMultiOf(l, a)
		if err != nil {
			return nil, nil, err
		}
		if c.Call == "multi.release" {
			n, err := readMRelease(first, m.names, m.o.owner)
			return value("freed", n, err), nil, nil
		}
		ok, err := readTaken(first, "RLOCK.MACQUIRE", m.names[0], m.o.owner)
		if err == nil && !ok && c.Call == "multi.scoped" {
			err = newError(ErrNotAcquired, m.names[0], "")
		}
		return value("granted", ok, err), nil, nil
	case "semaphore.acquire":
		ok, err := readTaken(first, "RSEM.ACQUIRE", key, "")
		return value("granted", ok, err), nil, nil
	case "semaphore.release", "semaphore.available", "semaphore.add_permits":
		n, err := readInt(first, "RSEM")
		return value("available", n, err), nil, nil
	case "semaphore.try_set_permits", "permits.try_set_permits", "latch.try_set_count":
		ok, err := readFlag(first, "TRYSET")
		return value("set", ok, err), nil, nil
	case "permits.acquire":
		ids, ok, err := readLeased(first)
		if err != nil || !ok {
			return value("granted", false, err), nil, nil
		}
		return map[string]any{"granted": true, "ids": ids}, nil, nil
	case "permits.release":
		ok, err := readFlag(first, "RSEM.RETURN")
		return value("returned", ok, err), nil, nil
	case "latch.await_zero":
		ok, err := readTaken(first, "RLATCH.AWAIT", key, "")
		return value("open", ok, err), nil, nil
	case "latch.count_down", "latch.count":
		n, err := readInt(first, "RLATCH")
		return value("count", n, err), nil, nil
	case "lock.force_release":
		ok, err := readFlag(first, "RLOCK.FORCERELEASE")
		return value("removed", ok, err), nil, nil
	case "lock.is_locked":
		ok, err := readFlag(first, "EXISTS")
		return value("locked", ok, err), nil, nil
	case "lock.is_held_by":
		ok, err := readFlag(first, "HEXISTS")
		return value("held", ok, err), nil, nil
	case "lock.hold_count":
		n, err := readHoldCount(first)
		return value("hold_count", n, err), nil, nil
	case "lock.remaining_lease":
		d, ok, err := readPTTL(first)
		return value("remaining_ms", orNull(d.Milliseconds(), ok), err), nil, nil
	case "election.leader":
		ld, ok, err := readLeader(first)
		return value("leader", orNull(map[string]any{"value": ld.Value, "term": ld.Term}, ok), err), nil, nil
	}
	return nil, nil, fmt.Errorf("a call this test cannot express: %s", c.Call)
}

// normal is v as plain JSON values (numbers as float64), so that got and want compare.
func normal(t *testing.T, v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// has: got has every key of want, with the same value.
func has(got, want map[string]any) bool {
	for k, w := range want {
		g, ok := got[k]
		if !ok || !reflect.DeepEqual(g, w) {
			return false
		}
	}
	return true
}

// read is what a call makes of a case's reply, and what it sends next.
type read struct {
	got  map[string]any
	next [][]any
}

func checkReplies(t *testing.T, doc *specFile) {
	readOf := func(l *Locks, c specCase) (read, error) {
		got, next, err := reads(l, c)
		return read{got, next}, err
	}
	eachExpressed(t, doc, readOf, func(c specCase, r read) {
		got, next := r.got, r.next
		want := expected(t, c)
		then, hasThen := want["then_sends"]
		delete(want, "then_sends")
		gotN := normal(t, got).(map[string]any)
		if !has(gotN, want) || len(gotN) < len(want) {
			t.Errorf("%s: got %v, want %v", c.ID, gotN, want)
		}
		if hasThen {
			raw, _ := json.Marshal(then)
			agree(t, c.ID, words(next), raw)
		} else if len(next) > 0 {
			t.Errorf("%s: sends %v next, and should not", c.ID, next)
		}
	})
}

// raises is the error a call makes of the server error line of the case (errors.json).
func raises(l *Locks, c specCase) (error, error) {
	a := specArgs(c.Args)
	r := reply{err: specServerError(c.Error)}
	switch c.Call {
	case "lock.acquire", "lock.scoped", "lock.release":
		k, err := usableLockOf(l, a)
		if err != nil {
			return nil, err
		}
		if c.Call == "lock.release" {
			_, err := readRelease(r, k.name, k.o.owner)
			return err, nil
		}
		replicas, _ := k.settle(c.Context.AttachedReplicas)
		_, _, err = readGrant([]reply{r}, k.o.fenced, replicas, k.name, k.o.owner)
		return err, nil
	case "multi.acquire", "multi.release":
		m, err := usableMultiOf(l, a)
		if err != nil {
			return nil, err
		}
		if c.Call == "multi.release" {
			_, err := readMRelease(r, m.names, m.o.owner)
			return err, nil
		}
		_, err = readTaken(r, "RLOCK.MACQUIRE", m.names[0], m.o.owner)
		return err, nil
	case "semaphore.acquire":
		key, err := a.str("key")
		if err != nil {
			return nil, err
		}
		_, err = readTaken(r, "RSEM.ACQUIRE", key, "")
		return err, nil
	}
	return nil, fmt.Errorf("a call this test cannot express: %s", c.Call)
}

func checkErrors(t *testing.T, doc *specFile) {
	eachExpressed(t, doc, raises, func(c specCase, raised error) {
		if raised == nil {
			t.Errorf("%s: %q raised nothing", c.ID, c.Error)
			return
		}
		got := class(raised)
		got["class"] = got["error"]
		delete(got, "error")
		want := expected(t, c)
		if gotN := normal(t, got).(map[string]any); !has(gotN, want) {
			t.Errorf("%s: got %v, want %v", c.ID, gotN, want)
		}
	})
}

func checkKeyspace(t *testing.T, doc *specFile) {
	if !reflect.DeepEqual(lossEventList, doc.LossEvents) {
		t.Errorf("the loss events are %q, the one list is %q", lossEventList, doc.LossEvents)
	}
	for _, c := range doc.Cases {
		a := specArgs(c.Args)
		var got any
		switch c.Call {
		case "keyspace.mode":
			flags, _ := a.str("flags")
			got = orNull(eventSource(flags), eventSource(flags) != "")
		case "keyspace.channels":
			mode, _ := a.str("mode")
			db, _ := a.integer("db")
			keys, _ := a.keys()
			got = eventChannels(mode, int(db), keys)
		case "keyspace.lost_key":
			db, _ := a.integer("db")
			channel, _ := a.str("channel")
			message, _ := a.str("message")
			key, ok := lostKey(int(db), channel, message)
			got = orNull(key, ok)
		default:
			t.Errorf("%s: a call this test cannot express: %s", c.ID, c.Call)
			continue
		}
		var want any
		if err := json.Unmarshal(c.Expect, &want); err != nil {
			t.Fatalf("%s: expect %s", c.ID, c.Expect)
		}
		if g := normal(t, got); !reflect.DeepEqual(g, want) {
			t.Errorf("%s: got %v, want %v", c.ID, g, want)
		}
	}
}

// refuse runs a call whose arguments should be refused through the public API, on a Locks
// whose server does not exist. A conversion refused (errRefused) is a refusal too.
func refuse(l *Locks, c specCase) error {
	a := specArgs(c.Args)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	count := func(k string) (int, error) {
		n, err := a.integer(k)
		return int(n), err
	}
	switch c.Call {
	case "lock.acquire", "lock.renew", "lock.scoped":
		k, err := lockOf(l, a)
		if err != nil {
			return err
		}
		switch c.Call {
		case "lock.scoped":
			ran := false
			err = k.Do(ctx, func(context.Context, *Hold) error { ran = true; return nil })
			if ran {
				return errors.New("the scoped call ran its function")
			}
			return err
		case "lock.renew":
			// A renewal's lease is its handle's: the handle is refused at its acquire.
			_, err = k.Acquire(ctx)
			return err
		}
		_, err = k.Acquire(ctx)
		return err
	case "multi.acquire":
		m, err := multiOf(l, a)
		if err != nil {
			return err
		}
		_, err = m.Acquire(ctx)
		return err
	case "semaphore.acquire", "semaphore.release", "semaphore.try_set_permits":
		s, err := semaphoreOf(l, a)
		if err != nil {
			return err
		}
		n, err := count("permits")
		if err != nil {
			return err
		}
		switch c.Call {
		case "semaphore.acquire":
			_, err = s.Acquire(ctx, n)
		case "semaphore.release":
			_, err = s.Release(ctx, n)
		default:
			_, err = s.TrySetPermits(ctx, n)
		}
		return err
	case "permits.acquire", "permits.release":
		s, err := permitsOf(l, a)
		if err != nil {
			return err
		}
		if c.Call == "permits.release" {
			id, err := a.str("id")
			if err != nil {
				return err
			}
			_, err = s.Release(ctx, id)
			return err
		}
		n, err := count("permits")
		if err != nil {
			return err
		}
		_, err = s.AcquireMany(ctx, n)
		return err
	case "latch.count_down", "latch.try_set_count", "latch.await_zero":
		latch, err := latchOf(l, a)
		if err != nil {
			return err
		}
		switch c.Call {
		case "latch.count_down":
			_, err = latch.CountDown(ctx)
		case "latch.try_set_count":
			var n int64
			if n, err = a.integer("count"); err == nil {
				_, err = latch.TrySetCount(ctx, n)
			}
		default:
			err = latch.AwaitZero(ctx)
		}
		return err
	case "election.campaign":
		e, err := electionOf(l, a)
		if err != nil {
			return err
		}
		value, err := a.str("value")
		if err != nil {
			return err
		}
		_, err = e.Campaign(ctx, value)
		return err
	case "queries.top":
		n, err := count("count")
		if err != nil {
			return err
		}
		_, err = l.Top(ctx, n)
		return err
	}
	return fmt.Errorf("a call this test cannot express: %s", c.Call)
}

func checkRefusals(t *testing.T, doc *specFile) {
	l := nowhere(t)
	for _, c := range doc.Cases {
		var want struct{ Class string }
		if err := json.Unmarshal(c.Expect, &want); err != nil || want.Class != "InvalidArgument" {
			t.Fatalf("%s: expect %s", c.ID, c.Expect)
		}
		err := refuse(l, c)
		switch {
		case errors.Is(err, errRefused):
			// Go's types cannot hold the value: refused by the conversion, nothing sent.
		case errors.Is(err, ErrInvalidArgument):
		default:
			t.Errorf("%s: not refused before sending: %v", c.ID, err)
		}
	}
}
