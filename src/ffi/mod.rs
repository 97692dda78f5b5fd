//! The few raw `RedisModule_*` calls the safe wrappers of `redis-module` 2.0.8 lack
//! or get wrong for binary data, one file per API family. Every `unsafe` block of
//! the module lives under this folder.
//!
//! Each wrapper takes `RedisModuleString`s, never C strings, so owners and keys may
//! hold any byte, NUL included.
//!
//! Functions that take raw pointers take them only as Redis hands them to a
//! callback, valid for that callback's duration.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod acl;
mod alloc;
mod blocking;
mod call;
mod commands;
mod events;
mod keys;
mod replicate;
mod server;
mod strings;
mod timers;

pub use acl::*;
pub use alloc::*;
pub use blocking::*;
pub use call::*;
pub use commands::*;
pub use events::*;
pub use keys::*;
pub use replicate::*;
pub use server::*;
pub use strings::*;
pub use timers::*;

use std::os::raw::{c_char, c_int, c_void};

use redis_module::raw;

/// Raw callback shapes, for the extern "C" functions the module hands to Redis.
pub type RawCtx = *mut raw::RedisModuleCtx;
pub type RawBlocked = *mut raw::RedisModuleBlockedClient;
pub type CommandCallback = extern "C" fn(RawCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;
pub type DisconnectCallback = extern "C" fn(RawCtx, RawBlocked);
pub type TimerCallback = extern "C" fn(RawCtx, *mut c_void);
pub type KeyspaceCallback =
    extern "C" fn(RawCtx, c_int, *const c_char, *mut raw::RedisModuleString) -> c_int;
pub type ServerEventCallback = extern "C" fn(RawCtx, raw::RedisModuleEvent, u64, *mut c_void);

type RawCommandFn = unsafe extern "C" fn(RawCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;
type RawDisconnectFn = unsafe extern "C" fn(RawCtx, RawBlocked);
type RawTimerFn = unsafe extern "C" fn(RawCtx, *mut c_void);
type RawKeyspaceFn =
    unsafe extern "C" fn(RawCtx, c_int, *const c_char, *mut raw::RedisModuleString) -> c_int;
type RawServerEventFn = unsafe extern "C" fn(RawCtx, raw::RedisModuleEvent, u64, *mut c_void);
