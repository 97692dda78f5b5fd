package rlock

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestAcquirePlans(t *testing.T) {
	base := acquirePlan{key: "orders", owner: "alice", lease: 30 * time.Second}
	cases := []struct {
		name string
		edit func(p *acquirePlan)
		want []any
	}{
		{"plain", func(*acquirePlan) {}, []any{"RLOCK.ACQUIRE", "orders", "alice", "LEASE", int64(30000), "REQ", "r1"}},
		{"wait", func(p *acquirePlan) { p.wait = waitSpec{d: 1500 * time.Microsecond} },
			[]any{"RLOCK.ACQUIRE", "orders", "alice", "LEASE", int64(30000), "BLOCK", int64(2), "REQ", "r1"}},
		{"forever", func(p *acquirePlan) { p.wait = waitSpec{forever: true} },
			[]any{"RLOCK.ACQUIRE", "orders", "alice", "LEASE", int64(30000), "BLOCK", int64(0), "REQ", "r1"}},
		{"every option", func(p *acquirePlan) {
			p.wait, p.fair, p.fenced, p.session = waitSpec{d: time.Second}, true, true, true
		}, []any{"RLOCK.ACQUIRE", "orders", "alice", "LEASE", int64(30000), "BLOCK", int64(1000), "FAIR", "TOKEN", "SESSION", "REQ", "r1"}},
		{"read side", func(p *acquirePlan) { p.side = Read },
			[]any{"RLOCK.ACQUIRE", "orders", "alice", "READ", "LEASE", int64(30000), "REQ", "r1"}},
		{"sub-millisecond lease", func(p *acquirePlan) { p.lease = time.Microsecond },
			[]any{"RLOCK.ACQUIRE", "orders", "alice", "LEASE", int64(1), "REQ", "r1"}},
	}
	for _, c := range cases {
		p := base
		c.edit(&p)
		if got := p.args("r1"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	p := base
	p.fenced, p.side = true, Write
	cmds := p.pipeline("r2", 1, 250*time.Millisecond)
	want := [][]any{
		{"RLOCK.ACQUIRE", "orders", "alice", "WRITE", "LEASE", int64(30000), "TOKEN", "REQ", "r2"},
		{"HGET", "orders", "alice:write"},
		{"WAIT", int64(1), int64(250)},
	}
	if !reflect.DeepEqual(cmds, want) {
		t.Errorf("pipeline %v", cmds)
	}
	if got := base.pipeline("r", 0, 0); len(got) != 1 {
		t.Errorf("no WAIT and no HGET expected: %v", got)
	}
	p = base
	p.wait, p.fair, p.session, p.fenced = waitSpec{forever: true}, true, true, true
	if got := p.recovery("r3"); !reflect.DeepEqual(got, []any{"RLOCK.ACQUIRE", "orders", "alice", "LEASE", int64(30000), "TOKEN", "REQ", "r3"}) {
		t.Errorf("recovery %v", got)
	}
}

func TestOtherPlans(t *testing.T) {
	check := func(got, want []any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v, want %v", got, want)
		}
	}
	check(releaseArgs("k", "o", "", "r"), []any{"RLOCK.RELEASE", "k", "o", "REQ", "r"})
	check(releaseArgs("k", "o", Write, "r"), []any{"RLOCK.RELEASE", "k", "o", "WRITE", "REQ", "r"})
	check(renewArgs("k", "o", Read, time.Second, "r"), []any{"RLOCK.RENEW", "k", "o", "READ", "LEASE", int64(1000), "REQ", "r"})
	check(macquireArgs("o", []string{"{a}1", "{a}2"}, time.Second, waitSpec{d: time.Second}, true, "r"),
		[]any{"RLOCK.MACQUIRE", "o", int64(2), "{a}1", "{a}2", "LEASE", int64(1000), "BLOCK", int64(1000), "SESSION", "REQ", "r"})
	check(mreleaseArgs("o", []string{"x"}, "r"), []any{"RLOCK.MRELEASE", "o", int64(1), "x", "REQ", "r"})
	check(semAcquireArgs("s", 2, waitSpec{}, "r"), []any{"RSEM.ACQUIRE", "s", "PERMITS", int64(2), "REQ", "r"})
	check(semReleaseArgs("s", 2, "r"), []any{"RSEM.RELEASE", "s", "PERMITS", int64(2), "REQ", "r"})
	check(semLeaseArgs("s", 1, time.Second, waitSpec{forever: true}, "r"), []any{"RSEM.LEASE", "s", "LEASE", int64(1000), "PERMITS", int64(1), "BLOCK", int64(0), "REQ", "r"})
	check(latchAwaitArgs("l", waitSpec{d: 5 * time.Millisecond}), []any{"RLATCH.AWAIT", "l", "BLOCK", int64(5)})
	check(waitArgs(2, 1500*time.Millisecond), []any{"WAIT", int64(2), int64(1500)})
	check(blockArgsReplaced([]any{"RLOCK.ACQUIRE", "k", "o", "BLOCK", int64(900)}, waitSpec{d: 300 * time.Millisecond}),
		[]any{"RLOCK.ACQUIRE", "k", "o", "BLOCK", int64(300)})
}

func TestRequestIDs(t *testing.T) {
	a, b := newRequestID(), newRequestID()
	if len(a) != 32 || a == b {
		t.Fatalf("%q %q", a, b)
	}
	if u := newUUID(); len(u) != 36 || u[14] != '4' {
		t.Fatalf("uuid %q", u)
	}
}

func TestArgumentChecks(t *testing.T) {
	refused := map[string]options{
		"negative wait":   collect([]Option{Wait(-time.Nanosecond)}),
		"zero lease":      collect([]Option{Lease(0)}),
		"negative lease":  collect([]Option{Lease(-time.Second)}),
		"huge lease":      collect([]Option{Lease(time.Duration(maxMillis+1) * time.Millisecond)}),
		"empty owner":     collect([]Option{Owner("")}),
		"long owner":      collect([]Option{Owner(string(make([]byte, 1025)))}),
		"negative sync":   collect([]Option{SyncReplicas(-1)}),
		"negative sync t": collect([]Option{SyncTimeout(-time.Second)}),
	}
	for name, o := range refused {
		if err := o.check("k"); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := collect(nil).check(""); !errors.Is(err, ErrInvalidArgument) {
		t.Error("an empty name passed")
	}
	ok := collect([]Option{Wait(0), Lease(time.Millisecond), Owner("o"), SyncReplicas(0), Fenced(), Fair(), Session(), WaitForever(), nil})
	if err := ok.check("k"); err != nil || !ok.wait.forever || !ok.fenced || !ok.fair || !ok.session {
		t.Errorf("good options refused: %v %+v", err, ok)
	}
	if err := checkSameSlot([]string{"{o}a", "{o}b"}); err != nil {
		t.Error(err)
	}
	if err := checkSameSlot([]string{"a", "b"}); !errors.Is(err, ErrInvalidArgument) {
		t.Error("names in two slots passed")
	}
	for _, names := range [][]string{nil, {}, {"{o}a", ""}} {
		if _, err := multiNames(names); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q passed", names)
		}
	}
	if got, err := multiNames([]string{"b", "a", "b"}); err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("%q %v", got, err)
	}
}

func TestReplies(t *testing.T) {
	if n, ok, err := parseGrant(int64(3), false); n != 3 || !ok || err != nil {
		t.Error(n, ok, err)
	}
	if _, ok, err := parseGrant(nil, true); ok || err != nil {
		t.Error("null is not a grant")
	}
	if _, _, err := parseGrant(int64(0), false); err == nil {
		t.Error("0 is no grant reply")
	}
	if _, _, err := parseGrant("x", false); err == nil {
		t.Error("text is no grant reply")
	}
	for v, want := range map[any]bool{int64(1): true, int64(0): false, true: true, "1": true} {
		if got, err := parseFlag(v, "x"); err != nil || got != want {
			t.Errorf("%v: %v %v", v, got, err)
		}
	}
	if _, err := parseFlag(int64(2), "x"); err == nil {
		t.Error("2 is no flag")
	}
}

type serverErr string

func (e serverErr) Error() string { return string(e) }

func TestErrorMapping(t *testing.T) {
	err := mapError(serverErr("NOTHELD the lock is not held by this owner"), "k", "o")
	if !errors.Is(err, ErrNotHeld) {
		t.Fatal(err)
	}
	dl := mapError(serverErr(`DEADLOCK "b\"x" waits for "k1" held by "a"; "a" waits for "k\x002" kept for "b\\"`), "k", "o")
	var d *DeadlockError
	if !errors.As(dl, &d) {
		t.Fatal(dl)
	}
	want := []DeadlockWait{{Owner: `b"x`, Key: "k1", Holder: "a"}, {Owner: "a", Key: "k\x002", Holder: `b\`, Kept: true}}
	if !reflect.DeepEqual(d.Cycle, want) {
		t.Fatalf("%+v", d.Cycle)
	}
	if parseCycle(`"a" waits for`) != nil || parseCycle(`nonsense`) != nil {
		t.Error("a malformed cycle parsed")
	}
	other := serverErr("ERR something")
	if mapError(other, "k", "o") != error(other) || mapError(nil, "k", "o") != nil {
		t.Error("other errors pass through")
	}
	wrapped := newError(ErrLost, "k", "why")
	if !errors.Is(wrapped, ErrLost) || wrapped.Error() != `rlock: hold lost ("k"): why` {
		t.Error(wrapped)
	}
	if !isNetworkError(fmt.Errorf("read: %w", errors.New("connection reset by peer"))) || isNetworkError(serverErr("ERR x")) {
		t.Error("network errors")
	}
}

func TestClientList(t *testing.T) {
	line := "id=7 addr=127.0.0.1:5 flags=b db=0 cmd=rlock.acquire user=default"
	if !clientBlockedIn(line, "rlock.acquire", "wait") {
		t.Error("blocked in the acquire")
	}
	if clientBlockedIn("id=7 flags=b cmd=wait", "rlock.acquire") || clientBlockedIn("id=7 flags=N cmd=rlock.acquire", "rlock.acquire") || clientBlockedIn("", "x") {
		t.Error("not blocked in the acquire")
	}
	if !clientBlockedIn("id=7 flags=b cmd=WAIT", "wait") {
		t.Error("case")
	}
}

func TestReplicasAndSlots(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=7001,state=online,offset=10,lag=0\r\nslave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\nslave_read_repl_offset:3\r\n"
	if n := onlineReplicas(info); n != 1 {
		t.Errorf("%d online", n)
	}
	if hashSlot("123456789") != 0x31C3 || hashSlot("{user1000}.following") != hashSlot("user1000") || hashSlot("{}x") != hashSlot("{}x") {
		t.Error("slots")
	}
	if hashSlot("foo") != 12182 || hashSlot("b") != 3300 {
		t.Error(hashSlot("foo"), hashSlot("b"))
	}
}

func TestSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lease := 30 * time.Second
	if got := validUntil(t0, lease); got != t0.Add(30*time.Second-302*time.Millisecond) {
		t.Error(got)
	}
	if renewDue(t0, lease) != t0.Add(10*time.Second) {
		t.Error("due at a third")
	}
	if retryAfter(100*time.Millisecond) != 20*time.Millisecond || retryAfter(time.Hour) != time.Second || retryAfter(5*time.Second) != 500*time.Millisecond {
		t.Error("retry")
	}
	w := waitSpec{d: time.Second}
	if l, ok := w.left(300 * time.Millisecond); !ok || l.d != 700*time.Millisecond {
		t.Error(l, ok)
	}
	if _, ok := w.left(time.Second); ok {
		t.Error("ran out")
	}
	if l, ok := (waitSpec{forever: true}).left(time.Hour); !ok || !l.forever {
		t.Error("forever")
	}
	for flags, want := range map[string]string{"": "", "Kd": "keyspace", "KEA": "keyspace", "Ed": "keyevent", "Kx": "", "Ex": ""} {
		if got := eventSource(flags); got != want {
			t.Errorf("%q: %q", flags, got)
		}
	}
	if !lossEvents["rlock.forcerelease"] || lossEvents["pexpire"] {
		t.Error("loss events")
	}
}

func TestInfoAndQueryReplies(t *testing.T) {
	resp2 := []any{"blocked", int64(1), "holders", []any{"bob", int64(2)}, "pttl", int64(29456), "queue", []any{"dave"}, "token", int64(7)}
	resp3 := map[any]any{"blocked": int64(1), "holders": map[any]any{"bob": int64(2)}, "pttl": int64(29456), "queue": []any{"dave"}, "token": int64(7)}
	for _, v := range []any{resp2, resp3} {
		info, err := parseInfo(v)
		if err != nil || info.Holders["bob"] != 2 || info.PTTL != 29456 || info.Blocked != 1 || info.Token != 7 || info.Queue[0] != "dave" {
			t.Errorf("%+v %v", info, err)
		}
	}
	free, _ := parseInfo([]any{"blocked", int64(0), "holders", []any{}, "pttl", int64(-2), "queue", []any{}, "token", nil})
	if len(free.Holders) != 0 || free.Token != 0 || free.PTTL != -2 {
		t.Errorf("%+v", free)
	}
	if ld, ok := leaderOf(LockInfo{Holders: map[string]int64{"node-a": 1}, Token: 4}); !ok || ld != (Leader{"node-a", 4}) {
		t.Error(ld)
	}
	if _, err := parseInfo("x"); err == nil {
		t.Error("a string is no info")
	}
	ws, err := parseWaiters([]any{[]any{"client-id", int64(12), "client-name", "billing-7", "kind", "lock", "owner", "bob", "permits", nil, "session", int64(1), "timeout-ms", int64(-1), "waited-ms", int64(5)}})
	if err != nil || ws[0] != (Waiter{ClientID: 12, ClientName: "billing-7", Kind: "lock", Owner: "bob", Session: true, TimeoutMs: -1, WaitedMs: 5}) {
		t.Errorf("%+v %v", ws, err)
	}
	cursor, locks, err := parseScan([]any{"17", []any{map[any]any{"holders": map[any]any{"alice": int64(2)}, "key": "orders", "mode": nil, "pttl": int64(5), "type": "lock", "waiters": int64(1)}}})
	if err != nil || cursor != "17" || locks[0].Key != "orders" || locks[0].Holders["alice"] != 2 || locks[0].Waiters != 1 {
		t.Errorf("%q %+v %v", cursor, locks, err)
	}
	top, err := parseTop([]any{[]any{"db", int64(0), "key", "orders", "kind", "lock", "longest-wait-ms", int64(3), "timeouts", int64(0), "wait-p99-usec", nil, "waiters", int64(1), "waits", int64(2)}}, "n1")
	if err != nil || top[0].Key != "orders" || top[0].Waits != 2 || top[0].Node != "n1" {
		t.Errorf("%+v %v", top, err)
	}
	st := parseStats("# rlock\r\nrlock_version:4.1.0\r\nrlock_acquires:26\r\nother:1\r\n", "")
	if n, ok := st.Number("acquires"); !ok || n != 26 || st.Fields["version"] != "4.1.0" || len(st.Fields) != 2 {
		t.Errorf("%+v", st)
	}
}

func TestGuardPlan(t *testing.T) {
	got, err := guardArgs("k", "o", "", 0, []any{"SET", "{k}:d", "v"})
	if err != nil || !reflect.DeepEqual(got, []any{"RLOCK.GUARD", "k", "o", "CALL", "SET", "{k}:d", "v"}) {
		t.Errorf("%v %v", got, err)
	}
	got, err = guardArgs("k", "o", Write, 7, []any{[]byte("INCRBY"), "{k}:d", 5})
	if err != nil || !reflect.DeepEqual(got, []any{"RLOCK.GUARD", "k", "o", "WRITE", "TOKEN", int64(7), "CALL", []byte("INCRBY"), "{k}:d", 5}) {
		t.Errorf("%v %v", got, err)
	}
	// Words after CALL are the command's, never options: a READ there is sent as it is.
	got, _ = guardArgs("k", "o", Read, 0, []any{"GET", "READ"})
	if !reflect.DeepEqual(got, []any{"RLOCK.GUARD", "k", "o", "READ", "CALL", "GET", "READ"}) {
		t.Errorf("%v", got)
	}
	for _, bad := range [][]any{nil, {}, {""}, {[]byte{}}, {7}, {nil}, {"SET", nil}, {"SET", []string{"a"}}, {"SET", map[string]int{}}} {
		if _, err := guardArgs("k", "o", "", 0, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%#v passed: %v", bad, err)
		}
	}
}

func TestGuardReplies(t *testing.T) {
	if v, err := readGuard(reply{val: "OK"}, "k", "o", 0); v != "OK" || err != nil {
		t.Error(v, err)
	}
	_, err := readGuard(reply{err: serverErr("NOTHELD the lock is not held by this owner")}, "k", "o", 7)
	var nh *NotHeldError
	if !errors.As(err, &nh) || *nh != (NotHeldError{Key: "k", Owner: "o"}) || errors.Is(err, ErrStaleToken) {
		t.Errorf("%v", err)
	}
	_, err = readGuard(reply{err: serverErr("STALETOKEN the lock's fencing token is now 8, not 7")}, "k", "o", 7)
	var st *StaleTokenError
	if !errors.As(err, &st) || *st != (StaleTokenError{Key: "k", Owner: "o", Token: 7, Current: 8}) || !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrStaleToken) {
		t.Errorf("%v", err)
	}
	inner := serverErr("WRONGTYPE Operation against a key holding the wrong kind of value")
	if _, err := readGuard(reply{err: inner}, "k", "o", 0); err != error(inner) {
		t.Errorf("the inner command's error: %v", err)
	}
	if tokenNow("STALETOKEN something else") != 0 {
		t.Error("no token in the text")
	}
}

func TestObserveDecisions(t *testing.T) {
	if got := observeSource("Kd"); got != keyspaceMode {
		t.Errorf("Kd: %q", got)
	}
	if got := observeSource("EA"); got != keyeventMode {
		t.Errorf("EA: %q", got)
	}
	if got := observeSource("Kx"); got != unlockSource {
		t.Errorf("Kx (no module events): %q", got)
	}
	if got := observeChannels(keyspaceMode, 2, "k"); !reflect.DeepEqual(got, []string{"__keyspace@2__:k"}) {
		t.Errorf("keyspace: %v", got)
	}
	want := []string{"__keyevent@0__:rlock.acquire", "__keyevent@0__:rlock.release", "__keyevent@0__:rlock.expire",
		"__keyevent@0__:rlock.forcerelease", "__keyevent@0__:rlock.sessionend"}
	if got := observeChannels(keyeventMode, 0, "k"); !reflect.DeepEqual(got, want) {
		t.Errorf("keyevent: %v", got)
	}
	if got := observeChannels(unlockSource, 0, "k"); !reflect.DeepEqual(got, []string{"redisson_lock__channel:{k}"}) {
		t.Errorf("unlock: %v", got)
	}
	if got := unlockChannel("{t}:k"); got != "redisson_lock__channel:{t}:k" {
		t.Errorf("a hash tag is kept: %q", got)
	}
	for _, c := range []struct {
		source, payload string
		matters         bool
	}{
		{keyspaceMode, "rlock.release", true}, {keyspaceMode, "del", true}, {keyspaceMode, "rlock.timeout", false},
		{keyeventMode, "k", true}, {keyeventMode, "other", false}, {unlockSource, "0", true},
	} {
		if got := observeMatters(c.source, "k", c.payload); got != c.matters {
			t.Errorf("%s %q: %v", c.source, c.payload, got)
		}
	}
	for _, c := range []struct {
		events bool
		pttl   int64
		want   time.Duration
	}{
		{false, 30000, observePoll}, {false, -2, observePoll},
		{true, -2, observeRecheck}, {true, -1, observeRecheck}, {true, 30000, observeRecheck},
		{true, 250, 251 * time.Millisecond}, {true, 0, time.Millisecond},
	} {
		if got := observeWait(c.events, c.pttl); got != c.want {
			t.Errorf("events %v pttl %d: %v, want %v", c.events, c.pttl, got, c.want)
		}
	}
}

func TestAskedTo(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("ASK 14604 127.0.0.1:7001"), "127.0.0.1:7001"},
		{errors.New("MOVED 14604 127.0.0.1:7001"), ""},
		{errors.New("TRYAGAIN Multiple keys request during rehashing of slot"), ""},
		{nil, ""},
	} {
		if got := askedTo(c.err); got != c.want {
			t.Errorf("%v: %q, want %q", c.err, got, c.want)
		}
	}
}
