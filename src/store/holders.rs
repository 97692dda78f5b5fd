//! Who holds a lock, by owner: what deadlock detection reads of a lock's hash.

use redis_module::Context;

use crate::core::keys::READ_WRITE_MODE_FIELD;
use crate::core::rwlock::WRITE_FIELD_SUFFIX;
use crate::core::waitlist::LockId;
use crate::ffi::{self, Key, KeyKind};

/// The owners holding `lock` now, in whichever database it is: a reentrant lock's
/// fields, a read-write lock's readers and its writer (`<owner>:write` read as
/// `<owner>`). Empty when the key is free or no lock. Reading a lock whose lease has
/// run out expires it, as any read does on a primary. The selected database is the
/// caller's again on return.
pub fn holding_owners(ctx: &Context, lock: &LockId) -> Vec<Vec<u8>> {
    let Some(_selected) = ffi::DbSelected::new(ctx, lock.db) else {
        return Vec::new();
    };
    let key = Key::open_readonly(ctx, &ffi::string(ctx, &lock.key));
    match key.kind() {
        KeyKind::Hash => owners_of(key.hash_fields()),
        _ => Vec::new(),
    }
}

fn owners_of(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<Vec<u8>> {
    let mode = READ_WRITE_MODE_FIELD.to_bytes();
    let read_write = fields.iter().any(|(field, _)| field == mode);
    let mut owners: Vec<Vec<u8>> = fields
        .into_iter()
        .filter(|(field, _)| field != mode)
        .map(|(mut field, _)| {
            if read_write && field.ends_with(WRITE_FIELD_SUFFIX) {
                field.truncate(field.len() - WRITE_FIELD_SUFFIX.len());
            }
            field
        })
        .collect();
    // The writer may hold read holds too: one owner.
    owners.sort();
    owners.dedup();
    owners
}
