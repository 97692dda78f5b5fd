package rlock

// Part of the pure core: the keyspace-event decisions (which notify-keyspace-events flags give
// which subscription, the channels, which messages tell of a loss). The watchdog's listener
// does the I/O. The list and the rules are clients/spec/keyspace.json's.

import (
	"strconv"
	"strings"
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
