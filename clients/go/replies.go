package rlock

// Part of the pure core: what each call makes of its replies. The faces send, then hand the
// replies to these; clients/spec/replies.json and errors.json test them (TestC21_).

import (
	"strconv"
	"strings"
	"time"
)

// grantRead is what an acquire's replies say of a grant.
type grantRead struct {
	// count is the owner's hold count; 0 when not known (a fenced grant whose HGET
	// replied null).
	count int64
	// token is the fencing token of a fenced grant, 0 otherwise.
	token int64
	// acked is how many replicas acknowledged the grant, when waited (a WAIT was sent).
	acked  int
	waited bool
}

// readGrant reads an acquire's pipeline (see acquirePlan.pipeline): ok false when not
// granted; a server error about the hold as mapError says.
func readGrant(replies []reply, fenced bool, replicas int, key, owner string) (grantRead, bool, error) {
	if len(replies) == 0 {
		return grantRead{}, false, unexpected("RLOCK.ACQUIRE", nil)
	}
	first := replies[0]
	if first.err != nil {
		return grantRead{}, false, mapError(first.err, key, owner)
	}
	n, ok, err := parseGrant(first.val, first.isNil)
	if err != nil || !ok {
		return grantRead{}, false, err
	}
	g := grantRead{count: n}
	i := 1
	if fenced {
		g.token, g.count = n, 0
		if i < len(replies) && replies[i].err == nil && !replies[i].isNil {
			g.count, _ = asInt(replies[i].val)
		}
		i++
	}
	if replicas > 0 && i < len(replies) {
		acked, _ := asInt(replies[i].val)
		g.acked, g.waited = int(acked), true
	}
	return g, true, nil
}

// acknowledged: as many replicas as asked acknowledged the grant (none asked: true).
func (g grantRead) acknowledged(replicas int) bool { return replicas == 0 || g.acked >= replicas }

// readRelease reads RLOCK.RELEASE: true when the lock is free, false when a re-entry was
// undone.
func readRelease(r reply, key, owner string) (bool, error) {
	if r.err != nil {
		return false, mapError(r.err, key, owner)
	}
	if r.isNil {
		return false, unexpected("RLOCK.RELEASE", nil)
	}
	return parseFlag(r.val, "RLOCK.RELEASE")
}

// renewOutcome is what one renewal's reply says of the hold.
type renewOutcome int

const (
	// renewed: the lease is full again.
	renewed renewOutcome = iota
	// renewLost: 0, or WRONGTYPE (the key was deleted and written over as something else):
	// the server no longer has the hold.
	renewLost
	// renewRetry: another error (LOADING, a failover's, an internal one): the hold may
	// stand; try again until the lease ends.
	renewRetry
)

// renewal reads RLOCK.RENEW, RSEM.RENEW or a fixed-lease hold's HEXISTS.
func renewal(r reply) renewOutcome {
	if r.err != nil {
		if serverCode(r.err.Error()) == "WRONGTYPE" {
			return renewLost
		}
		return renewRetry
	}
	ok, err := parseFlag(r.val, "RLOCK.RENEW")
	switch {
	case err != nil || r.isNil:
		return renewRetry
	case !ok:
		return renewLost
	}
	return renewed
}

// readTaken reads a call that takes or waits (RLOCK.MACQUIRE, RSEM.ACQUIRE, RLATCH.AWAIT):
// a positive integer is granted, null is not; a server error about a hold as mapError says.
func readTaken(r reply, what, key, owner string) (bool, error) {
	if r.err != nil {
		return false, mapError(r.err, key, owner)
	}
	_, ok, err := parseGrant(r.val, r.isNil)
	if err != nil {
		return false, unexpected(what, r.val)
	}
	return ok, nil
}

// readInt reads an integer reply.
func readInt(r reply, what string) (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, ok := asInt(r.val)
	if !ok || r.isNil {
		return 0, unexpected(what, r.val)
	}
	return n, nil
}

// readFlag reads a 1 / 0 reply.
func readFlag(r reply, what string) (bool, error) {
	if r.err != nil {
		return false, r.err
	}
	if r.isNil {
		return false, unexpected(what, nil)
	}
	return parseFlag(r.val, what)
}

// readMRelease reads RLOCK.MRELEASE: how many of the locks are free now; NOTHELD names the
// first key sent.
func readMRelease(r reply, keys []string, owner string) (int64, error) {
	if r.err != nil {
		return 0, mapError(r.err, keys[0], owner)
	}
	return readInt(r, "RLOCK.MRELEASE")
}

// readLeased reads RSEM.LEASE: the ids leased, or false for null.
func readLeased(r reply) ([]string, bool, error) {
	if r.err != nil {
		return nil, false, r.err
	}
	if r.isNil {
		return nil, false, nil
	}
	list, ok := r.val.([]any)
	if !ok || len(list) == 0 {
		return nil, false, unexpected("RSEM.LEASE", r.val)
	}
	ids := make([]string, len(list))
	for i, v := range list {
		if ids[i], ok = asText(v); !ok || ids[i] == "" {
			return nil, false, unexpected("RSEM.LEASE", r.val)
		}
	}
	return ids, true, nil
}

// readHoldCount reads HGET of a holder's field: null is 0.
func readHoldCount(r reply) (int64, error) {
	if r.err == nil && r.isNil {
		return 0, nil
	}
	return readInt(r, "HGET")
}

// readPTTL reads PTTL: the lease left, or false when there is no key (-2) or no expiry (-1).
func readPTTL(r reply) (time.Duration, bool, error) {
	n, err := readInt(r, "PTTL")
	if err != nil || n < 0 {
		return 0, false, err
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

// readLeader reads RLOCK.INFO of an election's lock: its leader, or false.
func readLeader(r reply) (Leader, bool, error) {
	if r.err != nil {
		return Leader{}, false, r.err
	}
	info, err := parseInfo(r.val)
	if err != nil {
		return Leader{}, false, err
	}
	ld, ok := leaderOf(info)
	return ld, ok, nil
}

// readGuard reads RLOCK.GUARD: the inner command's reply (the inner command's own errors as
// they are), or the refusal of the hold: NOTHELD as *NotHeldError, STALETOKEN as
// *StaleTokenError.
func readGuard(r reply, key, owner string, token int64) (any, error) {
	if r.err == nil {
		return r.val, nil
	}
	msg := r.err.Error()
	switch serverCode(msg) {
	case "NOTHELD":
		return nil, notHeld(key, owner, "")
	case "STALETOKEN":
		return nil, &StaleTokenError{Key: key, Owner: owner, Token: token, Current: tokenNow(msg)}
	}
	return nil, r.err
}

// tokenNow is the token in STALETOKEN's text ("the lock's fencing token is now 8, not 7" ->
// 8), 0 when it says none.
func tokenNow(msg string) int64 {
	_, after, ok := strings.Cut(msg, "is now ")
	if !ok {
		return 0
	}
	end := 0
	for end < len(after) && after[end] >= '0' && after[end] <= '9' {
		end++
	}
	n, _ := strconv.ParseInt(after[:end], 10, 64)
	return n
}
