//! Blocked clients: `RedisModule_BlockClient` and what its callbacks see.

use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::os::raw::c_void;
use std::ptr;

use redis_module::{raw, Context};

use super::{
    CommandCallback, DisconnectCallback, RawBlocked, RawCommandFn, RawCtx, RawDisconnectFn,
};

/// A client blocked by `RedisModule_BlockClient`, whose reply will be a `T`. Redis
/// requires exactly one `RedisModule_UnblockClient` per handle: `unblock` sends
/// one with a reply, and dropping the handle sends one without (the client timed
/// out or left), so no path can leak a handle or unblock it twice.
#[derive(Debug)]
pub struct BlockedClient<T> {
    handle: RawBlocked,
    reply: PhantomData<T>,
}

impl<T> BlockedClient<T> {
    /// Blocks the client running `ctx` with no server-side timeout: the module ends
    /// the wait. The reply handed to `unblock` reaches `on_reply` and is then dropped
    /// as a `Box<T>`. `on_unblock` runs for `CLIENT UNBLOCK ... TIMEOUT`; without it
    /// the server refuses to `CLIENT UNBLOCK` the client.
    pub fn block(
        ctx: &Context,
        on_reply: CommandCallback,
        on_unblock: Option<CommandCallback>,
        on_disconnect: DisconnectCallback,
    ) -> BlockedClient<T> {
        // SAFETY: ctx is the context of a command that may block; the callbacks
        // have the C signatures Redis expects, and free_boxed::<T> matches what
        // unblock() hands over, T being fixed by the handle's type.
        unsafe {
            let handle = raw::RedisModule_BlockClient.unwrap()(
                ctx.get_raw(),
                Some(on_reply as RawCommandFn),
                on_unblock.map(|callback| callback as RawCommandFn),
                Some(free_boxed::<T>),
                0,
            );
            raw::RedisModule_SetDisconnectCallback.unwrap()(
                handle,
                Some(on_disconnect as RawDisconnectFn),
            );
            BlockedClient {
                handle,
                reply: PhantomData,
            }
        }
    }

    /// An id for this handle, equal to `handle_id_of` in its callbacks.
    pub fn id(&self) -> usize {
        self.handle as usize
    }

    /// Ends the block with `reply`, which the reply callback sends.
    pub fn unblock(self, reply: T) {
        let this = ManuallyDrop::new(self);
        let data = Box::into_raw(Box::new(reply)) as *mut c_void;
        // SAFETY: the handle is unblocked once: self is consumed and not dropped.
        unsafe {
            raw::RedisModule_UnblockClient.unwrap()(this.handle, data);
        }
    }
}

impl<T> Drop for BlockedClient<T> {
    /// The client already left (timeout, disconnect) or is told nothing.
    fn drop(&mut self) {
        // SAFETY: the handle is unblocked once, here or in unblock().
        unsafe {
            raw::RedisModule_UnblockClient.unwrap()(self.handle, ptr::null_mut());
        }
    }
}

unsafe extern "C" fn free_boxed<T>(_ctx: RawCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: data came from Box::<T>::into_raw in BlockedClient::unblock.
        drop(Box::from_raw(data as *mut T));
    }
}

/// The blocked-client handle behind a reply or timeout callback.
pub fn handle_id_of(ctx: &Context) -> usize {
    // SAFETY: ctx is a blocked-client callback context.
    unsafe { raw::RedisModule_GetBlockedClientHandle.unwrap()(ctx.get_raw()) as usize }
}

/// The outcome handed to `unblock`, inside a reply or timeout callback.
pub fn blocked_outcome<T>(ctx: &Context) -> Option<&T> {
    // SAFETY: the private data is null or a Box<T> from unblock(), alive until the
    // free callback runs after this one.
    unsafe {
        let data = raw::RedisModule_GetBlockedClientPrivateData.unwrap()(ctx.get_raw());
        (data as *const T).as_ref()
    }
}
