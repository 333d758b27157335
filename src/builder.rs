//! The `with_*` methods of the public option structs, which are
//! `#[non_exhaustive]` so that adding an option breaks no caller: outside this
//! crate they are built from `Default` and these methods, as object_store's
//! and zarrs' options are.

/// Writes, for each field, a `with_<field>` method that returns the options
/// with that field set. `(Some)` after a method's name wraps the value (for
/// `Option` fields set by their value).
macro_rules! with_methods {
    ($options:ty { $( $(#[$doc:meta])* $field:ident: $value:ty => $method:ident $(($wrap:path))? ),* $(,)? }) => {
        impl $options {
            $(
                $(#[$doc])*
                #[must_use]
                pub fn $method(mut self, $field: $value) -> Self {
                    self.$field = $($wrap)?($field);
                    self
                }
            )*
        }
    };
}

pub(crate) use with_methods;
