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
