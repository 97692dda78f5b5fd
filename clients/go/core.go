package rlock

// The pure core: how each call becomes commands, how replies are read, which server error
// is which error, when the watchdog renews. No I/O here; core_test.go tests it alone.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Version is this module's version, which is also the version of the rlock server module
// it is made for.
const Version = "4.1.0"

// maxMillis is the largest LEASE or BLOCK the server takes (2^40 ms).
const maxMillis = int64(1) << 40

// Side is a side of a read-write lock: "" for a reentrant lock, or READ / WRITE.
type Side string

const (
	// Read holds are shared with other readers, never with another owner's writer.
	Read Side = "READ"
	// Write is the write hold: alone, apart from the writer's own read holds.
	Write Side = "WRITE"
)

// waitSpec is how long a call waits in the server: none (try once), d, or forever (BLOCK 0).
type waitSpec struct {
	d       time.Duration
	forever bool
}

func (w waitSpec) blocks() bool { return w.forever || w.d > 0 }

// left is what remains of w after elapsed; ok false once a timed wait ran out.
func (w waitSpec) left(elapsed time.Duration) (waitSpec, bool) {
	if w.forever {
		return w, true
	}
	if w.d-elapsed <= 0 {
		return waitSpec{}, false
	}
	return waitSpec{d: w.d - elapsed}, true
}

// millis rounds d up to whole milliseconds, so a non-zero duration never becomes 0 (which
// means forever for BLOCK).
func millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	if ms < 1 {
		ms = 1
	}
	if ms > maxMillis {
		ms = maxMillis
	}
	return ms
}

// newRequestID is a fresh REQ id: 16 random bytes as 32 hex characters. A resend of the
// same call carries the same id, so the server applies it at most once.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// options are what a handle's Option calls set. Bad values are kept and refused by check,
// before anything is sent.
type options struct {
	wait         waitSpec
	waitSet      bool
	lease        time.Duration
	leaseSet     bool
	fenced       bool
	fair         bool
	session      bool
	owner        string
	ownerSet     bool
	syncReplicas int
	syncSet      bool
	syncTimeout  time.Duration
}

// scoped are the options a scoped call (Do) acquires with: waiting until granted unless a Wait
// was set.
func (o options) scoped() options {
	if !o.waitSet {
		o.wait, o.waitSet = waitSpec{forever: true}, true
	}
	return o
}

// Option sets one option of a lock handle (or another synchronizer).
type Option func(*options)

// Wait waits in the server up to d for a busy lock (BLOCK), first come first served.
// Zero tries once; a negative wait is refused.
func Wait(d time.Duration) Option {
	return func(o *options) { o.wait, o.waitSet = waitSpec{d: d}, true }
}

// WaitForever waits in the server as long as it takes (BLOCK 0); cancel the context to give up.
func WaitForever() Option {
	return func(o *options) { o.wait, o.waitSet = waitSpec{forever: true}, true }
}

// Lease is a fixed lease: the watchdog does not renew it, and the hold is lost when it runs
// out unless Hold.Renew is called. Without it the lease is the Locks' watchdog lease
// (30 s), renewed every third of it.
func Lease(d time.Duration) Option {
	return func(o *options) { o.lease, o.leaseSet = d, true }
}

// Fenced asks for a fencing token (TOKEN): Hold.Token strictly increases each time the lock
// goes from free to held.
func Fenced() Option { return func(o *options) { o.fenced = true } }

// Fair takes the lock in arrival order among every FAIR caller, Redisson's included.
func Fair() Option { return func(o *options) { o.fair = true } }

// Session ties the hold to the connection that took it (SESSION): when it closes, as when
// this process dies, the server releases the hold at once. The hold keeps a connection of
// its own until it is released.
func Session() Option { return func(o *options) { o.session = true } }

// Owner names the owner id (1 to 1024 bytes) instead of the handle's own: handles with the
// same owner share one re-entrant hold.
func Owner(id string) Option { return func(o *options) { o.owner, o.ownerSet = id, true } }

// SyncReplicas makes an acquire return only once n replicas acknowledged the grant (WAIT);
// a grant acknowledged by fewer in time is released and the acquire fails with
// ErrNotAcknowledged. 0 sends no WAIT. Without it the Locks' default applies: one replica
// when the primary has any.
func SyncReplicas(n int) Option { return func(o *options) { o.syncReplicas, o.syncSet = n, true } }

// SyncTimeout is how long SyncReplicas waits for the acknowledgements (default 1 s).
func SyncTimeout(d time.Duration) Option { return func(o *options) { o.syncTimeout = d } }

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// checkName refuses an empty name.
func checkName(name string) error {
	if name == "" {
		return invalid(name, "a name must not be empty")
	}
	return nil
}

// check refuses, before anything is sent, what the server would refuse or misread.
func (o options) check(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if o.waitSet && !o.wait.forever && o.wait.d < 0 {
		return invalid(name, "a wait must not be negative")
	}
	if o.leaseSet && o.lease <= 0 {
		return invalid(name, "a lease must be longer than zero")
	}
	if o.leaseSet && o.lease > time.Duration(maxMillis)*time.Millisecond {
		return invalid(name, "a lease must be at most 2^40 ms")
	}
	if o.ownerSet && (o.owner == "" || len(o.owner) > 1024) {
		return invalid(name, "an owner id must be 1 to 1024 bytes")
	}
	if o.syncSet && o.syncReplicas < 0 {
		return invalid(name, "sync replicas must not be negative")
	}
	if o.syncTimeout < 0 {
		return invalid(name, "a sync timeout must not be negative")
	}
	return nil
}

// blockArgs appends BLOCK ms for a wait.
func blockArgs(args []any, w waitSpec) []any {
	switch {
	case w.forever:
		return append(args, "BLOCK", int64(0))
	case w.d > 0:
		return append(args, "BLOCK", millis(w.d))
	}
	return args
}

// acquirePlan is everything one RLOCK.ACQUIRE sends.
type acquirePlan struct {
	key, owner string
	side       Side
	lease      time.Duration
	wait       waitSpec
	fair       bool
	fenced     bool
	session    bool
}

func (p acquirePlan) args(req string) []any {
	a := []any{"RLOCK.ACQUIRE", p.key, p.owner}
	if p.side != "" {
		a = append(a, string(p.side))
	}
	a = append(a, "LEASE", millis(p.lease))
	a = blockArgs(a, p.wait)
	if p.fair {
		a = append(a, "FAIR")
	}
	if p.fenced {
		a = append(a, "TOKEN")
	}
	if p.session {
		a = append(a, "SESSION")
	}
	return append(a, "REQ", req)
}

// field is the lock hash's field that counts this hold: the owner, or owner:write.
func field(owner string, side Side) string {
	if side == Write {
		return owner + ":write"
	}
	return owner
}

// pipeline is an acquire's commands: the acquire, HGET of the hold count when fenced (the
// reply is then the token), and WAIT when replicas must acknowledge.
func (p acquirePlan) pipeline(req string, replicas int, timeout time.Duration) [][]any {
	cmds := [][]any{p.args(req)}
	if p.fenced {
		cmds = append(cmds, []any{"HGET", p.key, field(p.owner, p.side)})
	}
	if replicas > 0 {
		cmds = append(cmds, waitArgs(replicas, timeout))
	}
	return cmds
}

// recovery is the acquire sent again after a wait given up without its reply: the same REQ
// id, no BLOCK, no FAIR, no SESSION. The server replies the first reply while that grant
// stands, or tries once.
func (p acquirePlan) recovery(req string) []any {
	q := p
	q.wait, q.fair, q.session = waitSpec{}, false, false
	return q.args(req)
}

func waitArgs(n int, timeout time.Duration) []any {
	return []any{"WAIT", int64(n), millis(timeout)}
}

func releaseArgs(key, owner string, side Side, req string) []any {
	a := []any{"RLOCK.RELEASE", key, owner}
	if side != "" {
		a = append(a, string(side))
	}
	return append(a, "REQ", req)
}

func renewArgs(key, owner string, side Side, lease time.Duration, req string) []any {
	a := []any{"RLOCK.RENEW", key, owner}
	if side != "" {
		a = append(a, string(side))
	}
	return append(a, "LEASE", millis(lease), "REQ", req)
}

func macquireArgs(owner string, keys []string, lease time.Duration, w waitSpec, session bool, req string) []any {
	a := []any{"RLOCK.MACQUIRE", owner, int64(len(keys))}
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, "LEASE", millis(lease))
	a = blockArgs(a, w)
	if session {
		a = append(a, "SESSION")
	}
	return append(a, "REQ", req)
}

func mreleaseArgs(owner string, keys []string, req string) []any {
	a := []any{"RLOCK.MRELEASE", owner, int64(len(keys))}
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, "REQ", req)
}

func semAcquireArgs(key string, permits int, w waitSpec, req string) []any {
	return append(blockArgs([]any{"RSEM.ACQUIRE", key, "PERMITS", int64(permits)}, w), "REQ", req)
}

func semReleaseArgs(key string, permits int, req string) []any {
	return []any{"RSEM.RELEASE", key, "PERMITS", int64(permits), "REQ", req}
}

func semLeaseArgs(key string, permits int, lease time.Duration, w waitSpec, req string) []any {
	a := []any{"RSEM.LEASE", key, "LEASE", millis(lease), "PERMITS", int64(permits)}
	return append(blockArgs(a, w), "REQ", req)
}

func latchAwaitArgs(key string, w waitSpec) []any {
	return blockArgs([]any{"RLATCH.AWAIT", key}, w)
}

// asInt reads an integer reply (RESP2 or RESP3, or digits in a string).
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func asText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	}
	return "", false
}

// unexpected is a reply the contract does not allow: an error wrapping ErrUnexpectedReply.
func unexpected(what string, v any) error {
	return fmt.Errorf("%w: %s replied %#v", ErrUnexpectedReply, what, v)
}

// parseGrant reads an acquire's reply: (n, true) granted with n the count or token; false
// for null.
func parseGrant(v any, isNil bool) (int64, bool, error) {
	if isNil || v == nil {
		return 0, false, nil
	}
	n, ok := asInt(v)
	if !ok || n < 1 {
		return 0, false, unexpected("RLOCK.ACQUIRE", v)
	}
	return n, true, nil
}

// parseFlag reads a 1 / 0 reply.
func parseFlag(v any, what string) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	n, ok := asInt(v)
	if !ok || (n != 0 && n != 1) {
		return false, unexpected(what, v)
	}
	return n == 1, nil
}

// mapError turns a server error about a hold into this package's errors: NOTHELD into
// *NotHeldError, DEADLOCK naming a cycle into *DeadlockError; others (a DEADLOCK whose text
// is not a cycle too) pass through as go-redis returned them.
func mapError(err error, key, owner string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch serverCode(msg) {
	case "NOTHELD":
		return notHeld(key, owner, "")
	case "DEADLOCK":
		if cycle := parseCycle(strings.TrimPrefix(msg, "DEADLOCK ")); cycle != nil {
			return &DeadlockError{Cycle: cycle, Message: msg}
		}
	}
	return err
}

// clientBlockedIn says whether a CLIENT LIST line shows a client blocked (flag b) in one of
// commands (cmd=, case aside): then its reply has not been written yet.
func clientBlockedIn(line string, commands ...string) bool {
	var flags, cmd string
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "flags="); ok {
			flags = v
		} else if v, ok := strings.CutPrefix(f, "cmd="); ok {
			cmd = v
		}
	}
	if !strings.Contains(flags, "b") {
		return false
	}
	for _, c := range commands {
		if strings.EqualFold(cmd, c) {
			return true
		}
	}
	return false
}

// onlineReplicas counts INFO replication's replicas whose state is online.
func onlineReplicas(info string) int {
	n := 0
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(l, "slave")
		if !ok || rest == "" || rest[0] < '0' || rest[0] > '9' {
			continue
		}
		for _, f := range strings.Split(l, ",") {
			if f == "state=online" {
				n++
				break
			}
		}
	}
	return n
}

// hashSlot is the cluster slot of key: CRC16/XMODEM of its hash tag (or whole key) mod 16384.
func hashSlot(key string) int {
	k := key
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if close := strings.IndexByte(key[open+1:], '}'); close > 0 {
			k = key[open+1 : open+1+close]
		}
	}
	var crc uint16
	for i := 0; i < len(k); i++ {
		crc ^= uint16(k[i]) << 8
		for j := 0; j < 8; j++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}

// multiNames are a multi-key lock's names as sent: each once, sorted bytewise (so that two
// calls naming the same locks in another order send the same command). None, an empty name
// or more than 1024 are refused.
func multiNames(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, invalid("", "a multi-key lock needs at least one name")
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range names {
		if err := checkName(k); err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	if len(out) > 1024 {
		return nil, invalid("", "at most 1024 names")
	}
	sort.Strings(out)
	return out, nil
}

// checkSameSlot refuses, in a cluster, multi-key names that span slots, before anything is
// sent.
func checkSameSlot(keys []string) error {
	for _, k := range keys {
		if hashSlot(k) != hashSlot(keys[0]) {
			return invalid(k, "multi-key names must share a cluster slot (use a hash tag such as {order:7})")
		}
	}
	return nil
}

// The watchdog's schedule. A hold is trusted until its lease, less Redlock's drift margin,
// from when the request that set it was sent; it is renewed every third of the lease.

// drift is 1% of the lease plus 2 ms.
func drift(lease time.Duration) time.Duration { return lease/100 + 2*time.Millisecond }

func validUntil(basis time.Time, lease time.Duration) time.Time {
	return basis.Add(lease - drift(lease))
}

func renewDue(basis time.Time, lease time.Duration) time.Time { return basis.Add(lease / 3) }

// retryAfter is how soon a failed renewal is tried again.
func retryAfter(lease time.Duration) time.Duration {
	d := lease / 10
	if d < 20*time.Millisecond {
		d = 20 * time.Millisecond
	}
	if d > time.Second {
		d = time.Second
	}
	return d
}

// fields reads a RESP3 map or a RESP2 flat array of pairs into a map by name.
func fields(v any) (map[string]any, bool) {
	out := map[string]any{}
	switch x := v.(type) {
	case map[any]any:
		for k, val := range x {
			s, ok := asText(k)
			if !ok {
				return nil, false
			}
			out[s] = val
		}
	case map[string]any:
		return x, true
	case []any:
		if len(x)%2 != 0 {
			return nil, false
		}
		for i := 0; i < len(x); i += 2 {
			s, ok := asText(x[i])
			if !ok {
				return nil, false
			}
			out[s] = x[i+1]
		}
	default:
		return nil, false
	}
	return out, true
}

func intField(m map[string]any, name string) int64 {
	n, _ := asInt(m[name])
	return n
}

func textField(m map[string]any, name string) string {
	s, _ := asText(m[name])
	return s
}

// LockInfo is what RLOCK.INFO tells about one lock.
type LockInfo struct {
	// Holders maps owners to hold counts (a writer as owner:write); empty when free.
	Holders map[string]int64
	// PTTL is the lease left in ms; -2 when the lock is free.
	PTTL int64
	// Queue is the fair queue, head first.
	Queue []string
	// Blocked counts calls blocked on the lock in the server.
	Blocked int64
	// Token is the fencing counter, 0 when there is none.
	Token int64
	// Mode is "read" or "write" for a read-write lock, "" otherwise.
	Mode string
}

func parseInfo(v any) (LockInfo, error) {
	m, ok := fields(v)
	if !ok {
		return LockInfo{}, unexpected("RLOCK.INFO", v)
	}
	info := LockInfo{Holders: map[string]int64{}, PTTL: intField(m, "pttl"), Blocked: intField(m, "blocked"), Mode: textField(m, "mode")}
	info.Token, _ = asInt(m["token"])
	if h, ok := fields(m["holders"]); ok {
		for owner, c := range h {
			n, _ := asInt(c)
			info.Holders[owner] = n
		}
	}
	if q, ok := m["queue"].([]any); ok {
		for _, e := range q {
			if s, ok := asText(e); ok {
				info.Queue = append(info.Queue, s)
			}
		}
	}
	return info, nil
}

// Waiter is a call blocked in the server on one key (RLOCK.WAITERS).
type Waiter struct {
	ClientID   int64
	ClientName string
	// Kind is lock, fair, read, write, multi, permits, lease or latch.
	Kind      string
	Owner     string
	Permits   int64
	Session   bool
	TimeoutMs int64
	WaitedMs  int64
}

func parseWaiters(v any) ([]Waiter, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, unexpected("RLOCK.WAITERS", v)
	}
	out := make([]Waiter, 0, len(list))
	for _, e := range list {
		m, ok := fields(e)
		if !ok {
			return nil, unexpected("RLOCK.WAITERS", e)
		}
		out = append(out, Waiter{
			ClientID: intField(m, "client-id"), ClientName: textField(m, "client-name"),
			Kind: textField(m, "kind"), Owner: textField(m, "owner"), Permits: intField(m, "permits"),
			Session: intField(m, "session") == 1, TimeoutMs: intField(m, "timeout-ms"), WaitedMs: intField(m, "waited-ms"),
		})
	}
	return out, nil
}

// ScannedLock is a lock found by RLOCK.SCAN.
type ScannedLock struct {
	Key     string
	Kind    string // lock or rwlock
	Mode    string
	Holders map[string]int64
	PTTL    int64
	Waiters int64
}

func parseScan(v any) (string, []ScannedLock, error) {
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return "", nil, unexpected("RLOCK.SCAN", v)
	}
	cursor, _ := asText(pair[0])
	list, _ := pair[1].([]any)
	var out []ScannedLock
	for _, e := range list {
		m, ok := fields(e)
		if !ok {
			return "", nil, unexpected("RLOCK.SCAN", e)
		}
		s := ScannedLock{Key: textField(m, "key"), Kind: textField(m, "type"), Mode: textField(m, "mode"),
			PTTL: intField(m, "pttl"), Waiters: intField(m, "waiters"), Holders: map[string]int64{}}
		if h, ok := fields(m["holders"]); ok {
			for o, c := range h {
				s.Holders[o], _ = asInt(c)
			}
		}
		out = append(out, s)
	}
	return cursor, out, nil
}

// ContendedKey is one entry of RLOCK.TOP.
type ContendedKey struct {
	Node          string
	Key           string
	DB            int64
	Kind          string
	Waiters       int64
	LongestWaitMs int64
	Waits         int64
	Timeouts      int64
	WaitP99Usec   int64
}

func parseTop(v any, node string) ([]ContendedKey, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, unexpected("RLOCK.TOP", v)
	}
	var out []ContendedKey
	for _, e := range list {
		m, ok := fields(e)
		if !ok {
			return nil, unexpected("RLOCK.TOP", e)
		}
		out = append(out, ContendedKey{Node: node, Key: textField(m, "key"), DB: intField(m, "db"),
			Kind: textField(m, "kind"), Waiters: intField(m, "waiters"), LongestWaitMs: intField(m, "longest-wait-ms"),
			Waits: intField(m, "waits"), Timeouts: intField(m, "timeouts"), WaitP99Usec: intField(m, "wait-p99-usec")})
	}
	return out, nil
}

// ServerStats is INFO rlock of one server: every rlock_ field without the prefix.
type ServerStats struct {
	Node   string
	Fields map[string]string
}

// Number is a numeric field (acquires, blocked, ...); false when absent.
func (s ServerStats) Number(name string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s.Fields[name]), 10, 64)
	return n, err == nil
}

func parseStats(info, node string) ServerStats {
	s := ServerStats{Node: node, Fields: map[string]string{}}
	for _, l := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if name, isOurs := strings.CutPrefix(k, "rlock_"); ok && isOurs {
			s.Fields[name] = v
		}
	}
	return s
}

// Leader is an election's leader: its value (the owner id of the lock) and its term (the
// fencing token).
type Leader struct {
	Value string
	Term  int64
}

// leaderOf reads the leader from RLOCK.INFO; ok false when nobody leads.
func leaderOf(info LockInfo) (Leader, bool) {
	for v := range info.Holders {
		return Leader{Value: v, Term: info.Token}, true
	}
	return Leader{}, false
}

// isNetworkError says whether a request may have been lost on the way, so that sending it
// again with its REQ id is how to learn its outcome.
func isNetworkError(err error) bool {
	if err == nil {
		return false
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"EOF", "connection reset", "broken pipe", "use of closed network connection", "connection refused", "i/o timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func permitRenewArgs(key, id string, lease time.Duration) []any {
	return []any{"RSEM.RENEW", key, id, "LEASE", millis(lease)}
}

func returnArgs(key, id, req string) []any {
	return []any{"RSEM.RETURN", key, id, "REQ", req}
}

// scanArgs is RLOCK.SCAN's page from cursor, MATCH and TYPE only when given.
func scanArgs(cursor, match, kind string) []any {
	a := []any{"RLOCK.SCAN", cursor, "COUNT", int64(500)}
	if match != "" {
		a = append(a, "MATCH", match)
	}
	if kind != "" {
		a = append(a, "TYPE", kind)
	}
	return a
}

func statsArgs() []any { return []any{"INFO", "rlock"} }

func topArgs(n int) ([]any, error) {
	if n < 1 || n > 1000 {
		return nil, invalid("", "a count must be from 1 to 1000")
	}
	return []any{"RLOCK.TOP", "COUNT", int64(n)}, nil
}

// guardArgs is RLOCK.GUARD key owner [READ|WRITE] [TOKEN n] CALL command [arg ...]: inner runs
// in the server only while the hold stands (and, with a token, is still the hold that got
// it). No command, a command name that is not a non-empty string, or an argument go-redis
// would not write as it is (nil, a slice, a struct) is refused before anything is sent.
func guardArgs(key, owner string, side Side, token int64, inner []any) ([]any, error) {
	if len(inner) == 0 {
		return nil, invalid(key, `Guard needs a command to run, e.g. hold.Guard(ctx, "SET", key, value)`)
	}
	// A name is text: a string or bytes (asText would also take an integer, as its digits).
	_, isInt := inner[0].(int64)
	if name, ok := asText(inner[0]); isInt || !ok || name == "" {
		return nil, invalid(key, fmt.Sprintf("a guarded command's name must be a non-empty string, not %#v", inner[0]))
	}
	for i, a := range inner {
		switch a.(type) {
		case string, []byte, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, bool:
		default:
			return nil, invalid(key, fmt.Sprintf("argument %d of the guarded command is a %T: give strings, []byte, numbers or bools", i, a))
		}
	}
	args := []any{"RLOCK.GUARD", key, owner}
	if side != "" {
		args = append(args, string(side))
	}
	if token > 0 {
		args = append(args, "TOKEN", token)
	}
	args = append(args, "CALL")
	return append(args, inner...), nil
}

// The one-key commands of the queries and the counters.

func existsArgs(key string) []any       { return []any{"EXISTS", key} }
func pttlArgs(key string) []any         { return []any{"PTTL", key} }
func forceReleaseArgs(key string) []any { return []any{"RLOCK.FORCERELEASE", key} }
func infoArgs(key string) []any         { return []any{"RLOCK.INFO", key} }
func waitersArgs(key string) []any      { return []any{"RLOCK.WAITERS", key} }
func availableArgs(key string) []any    { return []any{"RSEM.AVAILABLE", key} }
func countDownArgs(key string) []any    { return []any{"RLATCH.COUNTDOWN", key} }
func latchCountArgs(key string) []any   { return []any{"RLATCH.COUNT", key} }

func trySetPermitsArgs(key string, n int) []any {
	return []any{"RSEM.TRYSETPERMITS", key, int64(n)}
}

func addPermitsArgs(key string, n int) []any { return []any{"RSEM.ADDPERMITS", key, int64(n)} }

func trySetCountArgs(key string, n int64) []any { return []any{"RLATCH.TRYSETCOUNT", key, n} }
