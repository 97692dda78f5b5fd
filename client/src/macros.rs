//! What every handle and guard of the crate would otherwise spell out again.

/// `Debug` for a handle or guard, showing what says something about it (not its `Locks`,
/// runtime or connections): `debug_fields!(Latch |l| { key: l.key, wait: l.wait })` prints
/// `Latch { key: .., wait: .. }`, each value read from `l: &Latch`.
macro_rules! debug_fields {
    ($ty:ident |$s:ident| { $($field:ident: $value:expr),* $(,)? }) => {
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let $s = self;
                f.debug_struct(stringify!($ty))
                    $(.field(stringify!($field), &$value))*
                    .finish()
            }
        }
    };
}

/// Builder steps a handle shares with the others, each with the handle's own doc: `fn lease;`
/// sets its `lease: Option<Duration>` field, `fn wait;` and `fn wait_forever;` its
/// `wait: Wait` field.
macro_rules! handle_steps {
    () => {};
    ($(#[$doc:meta])* fn lease; $($rest:tt)*) => {
        $(#[$doc])*
        pub fn lease(mut self, lease: std::time::Duration) -> Self {
            self.lease = Some(lease);
            self
        }

        handle_steps!($($rest)*);
    };
    ($(#[$doc:meta])* fn wait; $($rest:tt)*) => {
        $(#[$doc])*
        pub fn wait(mut self, wait: std::time::Duration) -> Self {
            self.wait = $crate::command::Wait::at_most(wait).into();
            self
        }

        handle_steps!($($rest)*);
    };
    ($(#[$doc:meta])* fn wait_forever; $($rest:tt)*) => {
        $(#[$doc])*
        pub fn wait_forever(mut self) -> Self {
            self.wait = $crate::command::Wait::Forever.into();
            self
        }

        handle_steps!($($rest)*);
    };
}
