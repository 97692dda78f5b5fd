package rlock

// Part of the pure core: the keyspace-event decisions (which notify-keyspace-events flags give
// which subscription, the channels, which messages tell of a loss). The watchdog's listener
// does the I/O. The list and the rules are clients/spec/keyspace.json's.

import (
	"strconv"
	"strings"
	"time"
)

// lossEventList is every keyspace event that can end a hold, and none that a client's own
// work sends for a hold that stands (expire, pexpire and hset are every renewal's and
// acquire's): the one list of clients/spec/keyspace.json, in its order.
var lossEventList = []string{
	// the module's events that end a hold
	"rlock.release", "rlock.expire", "rlock.forcerelease", "rlock.sessionend", "rsem.return", "rsem.reclaim",
	// the key removed
	"del", "expired", "evicted", "rename_from", "move_from",
	// a holder's field removed
	"hdel", "hexpired",
	// the key replaced by a command that names it as destination
	"set", "restore", "rename_to", "copy_to", "sortstore", "sunionstore", "sinterstore", "sdiffstore",
	"zunionstore", "zinterstore", "zdiffstore", "zrangestore", "georadiusstore", "geosearchstore",
	// Redis 8.2's generic classes o and c
	"overwritten", "type_changed",
}

var lossEvents = func() map[string]bool {
	m := make(map[string]bool, len(lossEventList))
	for _, e := range lossEventList {
		m[e] = true
	}
	return m
}()

// The subscription modes.
const (
	keyspaceMode = "keyspace"
	keyeventMode = "keyevent"
)

// eventSource reads notify-keyspace-events: "keyspace" when K and the module's class d (or A,
// which includes it) are on, "keyevent" with E and not K, "" when nothing the module
// publishes arrives (then renewals alone tell of a loss). K wins over E: a keyspace
// subscription hears only the keys held, a keyevent one every key of the database.
func eventSource(flags string) string {
	module := strings.ContainsAny(flags, "dA")
	switch {
	case module && strings.Contains(flags, "K"):
		return keyspaceMode
	case module && strings.Contains(flags, "E"):
		return keyeventMode
	}
	return ""
}

// eventChannels are the channels to subscribe: one per held key in keyspace mode, one per
// loss event (in the list's order) in keyevent mode.
func eventChannels(mode string, db int, keys []string) []string {
	var out []string
	switch mode {
	case keyspaceMode:
		for _, k := range keys {
			out = append(out, keyspaceChannel(db, k))
		}
	case keyeventMode:
		for _, ev := range lossEventList {
			out = append(out, keyeventChannel(db, ev))
		}
	}
	return out
}

// lostKey is the key whose holds must be checked now after message on channel, or false: a
// loss event on db's keyspace channel of the key, or db's keyevent channel of a loss event
// (whose message is the key). Any other channel, another database's included, is not a loss.
func lostKey(db int, channel, message string) (string, bool) {
	if key, ok := strings.CutPrefix(channel, keyspaceChannel(db, "")); ok {
		return key, lossEvents[message]
	}
	if ev, ok := strings.CutPrefix(channel, keyeventChannel(db, "")); ok {
		return message, lossEvents[ev]
	}
	return "", false
}

func keyspaceChannel(db int, key string) string {
	return "__keyspace@" + strconv.Itoa(db) + "__:" + key
}

func keyeventChannel(db int, event string) string {
	return "__keyevent@" + strconv.Itoa(db) + "__:" + event
}

// An election's observer (Election.Observe) follows one lock's holder. What it listens to is
// docs/COMMANDS.md's "observe" row, as the Rust client does: the module's events on the lock
// (keyspaceMode, keyeventMode) while notify-keyspace-events publishes them, else the unlock
// channel (unlockSource) beside a read every 50 ms.
const unlockSource = "unlock"

// lockEventList are the module's events that can change who holds a lock.
var lockEventList = []string{"rlock.acquire", "rlock.release", "rlock.expire", "rlock.forcerelease", "rlock.sessionend"}

// Observer timing: how often it reads the lock while polling, and at the latest while it
// follows events (then it also looks at notify-keyspace-events again).
const (
	observePoll    = 50 * time.Millisecond
	observeRecheck = time.Second
)

// observeSource is what an observer listens to when notify-keyspace-events is flags.
func observeSource(flags string) string {
	if s := eventSource(flags); s != "" {
		return s
	}
	return unlockSource
}

// observeChannels are the channels an observer of key subscribes to for source.
func observeChannels(source string, db int, key string) []string {
	switch source {
	case keyspaceMode:
		return []string{keyspaceChannel(db, key)}
	case keyeventMode:
		out := make([]string, 0, len(lockEventList))
		for _, ev := range lockEventList {
			out = append(out, keyeventChannel(db, ev))
		}
		return out
	}
	return []string{unlockChannel(key)}
}

// unlockChannel is where the module publishes that a release left key free (Redisson's
// channel, whose name keeps the key's hash tag if it has one).
func unlockChannel(key string) string {
	if strings.Contains(key, "{") {
		return "redisson_lock__channel:" + key
	}
	return "redisson_lock__channel:{" + key + "}"
}

// observeMatters tells whether a message (payload) on one of source's channels may announce a
// change of key's holder: any event of the key but a wait's timeout (keyspace), an event
// naming the key (keyevent: the other keys' events come on the same channels), any unlock.
func observeMatters(source, key, payload string) bool {
	switch source {
	case keyspaceMode:
		return payload != "rlock.timeout"
	case keyeventMode:
		return payload == key
	}
	return true
}

// observeWait is how long an observer waits for a message before it reads the lock again:
// following events, until the holder's lease ends (pttl ms; a lapse that nobody waits on
// raises no event) and a second at the most; otherwise the poll.
func observeWait(events bool, pttl int64) time.Duration {
	if !events {
		return observePoll
	}
	// A millisecond past the end, so the read finds it over.
	if end := time.Duration(pttl+1) * time.Millisecond; pttl >= 0 && end < observeRecheck {
		return end
	}
	return observeRecheck
}
