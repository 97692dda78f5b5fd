package rlock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Guard runs a command in the server only while this hold stands, checked in the same server
// turn (RLOCK.GUARD with the hold's name, owner, side and, for a Fenced hold, its token): the
// fencing check done by the server itself. A holder that paused past its lease and wakes
// after another took the lock is refused, and its write never lands.
//
// It returns a *redis.Cmd, as go-redis's Do does, because the inner command's reply can be
// of any type: read it with Result, Text, Int64, Bool, Slice... A nil reply is redis.Nil.
// Cmd.Err is, when the hold no longer stands and nothing ran, an error wrapping ErrNotHeld
// (*NotHeldError), or for a Fenced hold whose lock was taken again since, one wrapping both
// ErrStaleToken and ErrNotHeld (*StaleTokenError); the inner command's own errors come as
// go-redis returns them. No command, or an argument go-redis would not send as it is, is
// refused before anything is sent (ErrInvalidArgument), and so is a hold released already.
//
// The command is sent once: a connection that broke on the way is an error, never a resend
// (the write may or may not have run). In a cluster every key of the command must be in the
// lock's slot: use a hash tag ("orders" and "order:{orders}:1"). A Leadership's Guard writes
// only while that leader leads in its term.
func (h *Hold) Guard(ctx context.Context, args ...any) *redis.Cmd {
	if h == nil {
		return failed(ctx, args, invalid("", "a nil *Hold"))
	}
	k := h.lock
	if err := k.usable(ctx); err != nil {
		return failed(ctx, args, err)
	}
	guard, err := guardArgs(k.name, k.o.owner, k.side, h.token, args)
	if err != nil {
		return failed(ctx, args, err)
	}
	if h.released.isDone() {
		return failed(ctx, guard, notHeld(k.name, k.o.owner, "released already"))
	}
	cmd := redis.NewCmd(ctx, guard...)
	r, err := k.l.do(ctx, k.name, false, guard...)
	switch {
	case err != nil:
		cmd.SetErr(err)
	case r.isNil:
		cmd.SetErr(redis.Nil)
	default:
		v, err := readGuard(r, k.name, k.o.owner, h.token)
		if err != nil {
			cmd.SetErr(err)
		} else {
			cmd.SetVal(v)
		}
	}
	return cmd
}

// failed is a command refused before it was sent.
func failed(ctx context.Context, args []any, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetErr(err)
	return cmd
}
