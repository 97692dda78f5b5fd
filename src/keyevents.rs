//! The module's own keyspace events (class module, `d`; see `core::keyevents`), on the
//! key concerned. Nothing is built, not even the key's name, unless the server's
//! `notify-keyspace-events` publishes them: a flag read per event otherwise.

use redis_module::{Context, RedisString};

use crate::core::keyevents::{published, KeyEvent};
use crate::core::waitlist::LockId;
use crate::ffi;

/// Whether the server publishes the module's events now (`d`, and `K` or `E`).
pub fn on() -> bool {
    published(ffi::keyspace_event_flags())
}

/// `event` on `key`, in the database `ctx` has selected.
pub fn key(ctx: &Context, event: KeyEvent, key: &RedisString) {
    if on() {
        ffi::notify_module_event(ctx, event.name(), key);
    }
}

/// `event` on `lock`, from a context of the module's own (a timer, an event callback),
/// whose database is selected for it. Never from a command's context of another
/// database: that would change its client's database.
pub fn lock(ctx: &Context, event: KeyEvent, lock: &LockId) {
    if !on() {
        return;
    }
    if ffi::selected_db(ctx) != lock.db && !ffi::select_db(ctx, lock.db) {
        return;
    }
    ffi::notify_module_event(ctx, event.name(), &ffi::string(ctx, &lock.key));
}

/// `event` on `lock`, from any context: its database is selected for the event and the
/// one selected before is selected again after.
pub fn lock_in_its_db(ctx: &Context, event: KeyEvent, lock: &LockId) {
    if !on() {
        return;
    }
    if let Some(_selected) = ffi::DbSelected::new(ctx, lock.db) {
        ffi::notify_module_event(ctx, event.name(), &ffi::string(ctx, &lock.key));
    }
}
