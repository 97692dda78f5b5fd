//! The calling user's key permissions (`RedisModule_GetCurrentUserName`,
//! `RedisModule_GetModuleUserFromUserName`, `RedisModule_ACLCheckKeyPermissions`: Redis
//! 7.0+, Valkey), for commands that show what other keys hold.

use redis_module::{raw, Context, RedisString};

/// The user who sent the current command, as the ACL knows them.
pub struct CallingUser(*mut raw::RedisModuleUser);

impl CallingUser {
    /// `None` where the server lacks the calls, or the context has no user (a script's or
    /// the module's own context is the unrestricted caller).
    pub fn of(ctx: &Context) -> Option<CallingUser> {
        // SAFETY: each function pointer is checked before use; the name string is the
        // server's, freed here once the user is looked up; the user is freed on drop.
        unsafe {
            let (Some(name_of), Some(user_of), Some(_), Some(free_string)) = (
                raw::RedisModule_GetCurrentUserName,
                raw::RedisModule_GetModuleUserFromUserName,
                raw::RedisModule_ACLCheckKeyPermissions,
                raw::RedisModule_FreeString,
            ) else {
                return None;
            };
            let name = name_of(ctx.get_raw());
            if name.is_null() {
                return None;
            }
            let user = user_of(name);
            free_string(ctx.get_raw(), name);
            (!user.is_null()).then_some(CallingUser(user))
        }
    }

    /// Whether the user may read `key`'s value (`%R~` or `~` patterns).
    pub fn may_read(&self, key: &RedisString) -> bool {
        // SAFETY: self.0 is a live user (freed only on drop) and key a live string;
        // CallingUser exists only where the function was found.
        unsafe {
            raw::RedisModule_ACLCheckKeyPermissions.is_some_and(|check| {
                check(self.0, key.inner, raw::REDISMODULE_CMD_KEY_ACCESS as i32)
                    == raw::REDISMODULE_OK as i32
            })
        }
    }
}

impl Drop for CallingUser {
    fn drop(&mut self) {
        // SAFETY: the user came from GetModuleUserFromUserName and is freed once.
        unsafe {
            if let Some(free) = raw::RedisModule_FreeModuleUser {
                free(self.0);
            }
        }
    }
}
