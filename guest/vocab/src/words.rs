//! `words!`: a closed list of protocol words as a Rust enum, each spelled once.
//!
//! The macro gives the enum its serde form (the word itself), `as_str`, `parse`, `ALL`
//! and `Display`, so no word is ever written twice and no decision compares strings.

macro_rules! words {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $word)] $variant, )*
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The word as the protocol and the audit record spell it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $word, )*
                }
            }

            /// The variant spelled `word`, if any.
            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $( $word => Some($name::$variant), )*
                    _ => None,
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.pad(self.as_str())
            }
        }
    };
}
