package rlock

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Test them with errors.Is; the errors returned wrap them with the lock's
// name and the reason.
var (
	// ErrNotAcquired: the wait ended (or a single try found the lock held) without a grant.
	ErrNotAcquired = errors.New("rlock: not acquired")
	// ErrNotHeld: the server says the owner does not hold the lock (its lease ran out, or it
	// was force-released or deleted) at a release.
	ErrNotHeld = errors.New("rlock: not held by this owner")
	// ErrLost: the hold can no longer be trusted: a renewal was refused, or the lease ran out
	// while renewals failed. Work done under it since may overlap another holder.
	ErrLost = errors.New("rlock: hold lost")
	// ErrNotAcknowledged: fewer replicas than asked acknowledged a grant in time (WAIT), so
	// the grant was released instead of believed.
	ErrNotAcknowledged = errors.New("rlock: grant not acknowledged by replicas")
	// ErrInvalidArgument: a call's arguments were refused before anything was sent.
	ErrInvalidArgument = errors.New("rlock: invalid argument")
	// ErrClosed: the Locks was closed.
	ErrClosed = errors.New("rlock: closed")
	// ErrStaleToken: a guarded command (Hold.Guard) was refused because the lock's fencing
	// token is no longer the hold's: the lock was taken again since. An error that wraps it
	// also wraps ErrNotHeld (the hold that got the token is gone); errors.As with
	// *StaleTokenError gives the tokens.
	ErrStaleToken = errors.New("rlock: the lock's fencing token is newer than the hold's")
	// ErrUnexpectedReply: the server replied what the contract does not allow (an acquire
	// replied 0, a release 2): a protocol violation, never read as a grant.
	ErrUnexpectedReply = errors.New("rlock: unexpected reply")
)

// NotHeldError is the server's NOTHELD: Owner holds nothing on Key (its lease ran out, it
// was force-released or deleted), at a release or a guarded command. It wraps ErrNotHeld.
type NotHeldError struct {
	Key, Owner string
	// Reason says why, when the client knows more than the server's word.
	Reason string
}

func (e *NotHeldError) Error() string {
	s := fmt.Sprintf("%s (%q): owner %q", ErrNotHeld.Error(), e.Key, e.Owner)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

func (e *NotHeldError) Unwrap() error { return ErrNotHeld }

func notHeld(key, owner, reason string) error {
	return &NotHeldError{Key: key, Owner: owner, Reason: reason}
}

// StaleTokenError is the server's STALETOKEN at a guarded command: Owner may hold Key, but
// not as the hold that got fencing token Token; the lock's token is now Current (0 when the
// server's text did not say). errors.Is matches it as ErrStaleToken and as ErrNotHeld.
type StaleTokenError struct {
	Key, Owner     string
	Token, Current int64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("%s (%q): owner %q, token %d, the lock's is now %d", ErrStaleToken.Error(), e.Key, e.Owner, e.Token, e.Current)
}

func (e *StaleTokenError) Unwrap() []error { return []error{ErrStaleToken, ErrNotHeld} }

// DeadlockWait is one wait of a deadlock's cycle: Owner waits for Key, which Holder holds
// (or, with Kept, which is kept free for Holder's multi-key call).
type DeadlockWait struct {
	Owner, Key, Holder string
	Kept               bool
}

// DeadlockError is the server's refusal of a wait that would have closed a cycle of waits
// (DEADLOCK). The call holds nothing new. Get it with errors.As.
type DeadlockError struct {
	// Cycle lists the waits of the cycle, the refused call's own first.
	Cycle []DeadlockWait
	// Message is the server's text.
	Message string
}

func (e *DeadlockError) Error() string { return "rlock: " + e.Message }

// lockError wraps a sentinel with the lock's name and a reason.
type lockError struct {
	sentinel error
	key      string
	reason   string
}

func (e *lockError) Error() string {
	s := e.sentinel.Error()
	if e.key != "" {
		s += fmt.Sprintf(" (%q)", e.key)
	}
	if e.reason != "" {
		s += ": " + e.reason
	}
	return s
}

func (e *lockError) Unwrap() error { return e.sentinel }

func newError(sentinel error, key, reason string) error {
	return &lockError{sentinel: sentinel, key: key, reason: reason}
}

func invalid(key, reason string) error { return newError(ErrInvalidArgument, key, reason) }

// serverCode is the first word of a server error ("NOTHELD", "DEADLOCK", "ERR").
func serverCode(msg string) string {
	code, _, _ := strings.Cut(msg, " ")
	return code
}

// parseCycle reads a DEADLOCK error's text: `"b" waits for "k1" held by "a"; ...`. Nil when
// the text is not of that shape.
func parseCycle(text string) []DeadlockWait {
	rest := strings.TrimSpace(text)
	var cycle []DeadlockWait
	for {
		owner, after, ok := quoted(rest)
		if !ok {
			return nil
		}
		after, ok = strings.CutPrefix(after, " waits for ")
		if !ok {
			return nil
		}
		key, after, ok := quoted(after)
		if !ok {
			return nil
		}
		kept := false
		if a, ok := strings.CutPrefix(after, " held by "); ok {
			after = a
		} else if a, ok := strings.CutPrefix(after, " kept for "); ok {
			after, kept = a, true
		} else {
			return nil
		}
		holder, after, ok := quoted(after)
		if !ok {
			return nil
		}
		cycle = append(cycle, DeadlockWait{Owner: owner, Key: key, Holder: holder, Kept: kept})
		if after == "" {
			return cycle
		}
		next, ok := strings.CutPrefix(after, "; ")
		if !ok {
			return nil
		}
		rest = next
	}
}

// quoted reads a leading "..." with \" \\ and \xNN escapes.
func quoted(s string) (string, string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	var b []byte
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return string(b), s[i+1:], true
		case '\\':
			if i+1 >= len(s) {
				return "", "", false
			}
			switch s[i+1] {
			case 'x':
				if i+3 >= len(s) {
					return "", "", false
				}
				var v byte
				if _, err := fmt.Sscanf(s[i+2:i+4], "%02x", &v); err != nil {
					return "", "", false
				}
				b = append(b, v)
				i += 3
			default:
				b = append(b, s[i+1])
				i++
			}
		default:
			b = append(b, c)
		}
	}
	return "", "", false
}
