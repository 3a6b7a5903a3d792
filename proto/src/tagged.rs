//! How message enums and code enums appear on the wire, so that old and new
//! peers can talk.
//!
//! **Message enums** ([`crate::node::ToNode`], [`crate::node::FromNode`]) are
//! encoded as a `u16` tag (a postcard varint) followed by the payload of
//! that message, if it has one. A tag this build does not know decodes to
//! the enum's `Unknown { tag }` variant instead of failing: the frame is
//! consumed whole, so the receiver may answer "unsupported" and keep reading.
//! Rules for changing them:
//!
//! 1. Tags are append-only. A tag, once released, keeps its meaning and its
//!    payload layout forever; a retired tag is never reused. Tag 0 is never used.
//! 2. To change a message's fields, add a new message with a new tag (and
//!    keep sending the old one to peers whose protocol version predates it).
//! 3. Bytes after a decoded payload are ignored; no rule relies on that
//!    except the skipping of unknown messages.
//!
//! **Code enums** (signals, error codes, notice kinds) are encoded as a plain
//! `u16` and decode an unknown number to their `Unknown(n)` variant, so a new
//! code never makes an old peer drop a message. Codes are append-only too.
//!
//! Other nested enums and structs are closed: a peer sending a variant an old
//! peer does not know makes that one frame fail to decode
//! ([`crate::FrameError::Decode`], recoverable), which is why new meaning goes
//! into new tags.

/// Defines a message enum with explicit wire tags, an `Unknown { tag }`
/// variant, and serde impls following the rules in this module.
macro_rules! tagged_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $tag:literal => $var:ident $(($ty:ty))?
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $var $(($ty))?,
            )+
            /// A message whose tag this build does not know (sent by a newer
            /// peer). Skip it, or answer that it is unsupported. It cannot be sent.
            Unknown {
                /// The tag that was received.
                tag: u16,
            },
        }

        // Tags must be unique and non-zero; checked at compile time.
        const _: () = {
            let tags: &[u16] = &[$($tag),+];
            let mut i = 0;
            while i < tags.len() {
                assert!(tags[i] != 0, "tag 0 is reserved");
                let mut j = i + 1;
                while j < tags.len() {
                    assert!(tags[i] != tags[j], "duplicate message tag");
                    j += 1;
                }
                i += 1;
            }
        };

        impl $name {
            /// Every tag this build knows, in declaration order.
            pub const KNOWN_TAGS: &'static [u16] = &[$($tag),+];

            /// The name ([`Self::name`]) of every message this build knows, in
            /// declaration order.
            pub const KNOWN_NAMES: &'static [&'static str] = &[$(stringify!($var)),+];

            /// The wire tag of this message.
            pub fn tag(&self) -> u16 {
                match self {
                    $( $name::$var { .. } => $tag, )+
                    $name::Unknown { tag } => *tag,
                }
            }

            /// The message's name, for logs and error texts.
            pub fn name(&self) -> &'static str {
                match self {
                    $( $name::$var { .. } => stringify!($var), )+
                    $name::Unknown { .. } => "Unknown",
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeTuple;
                let me = self;
                let mut tuple = serializer.serialize_tuple(2)?;
                $( $crate::tagged::tagged_enum!(@ser me tuple $name $var $tag $(($ty))?); )+
                Err(serde::ser::Error::custom(concat!(
                    "an unknown ", stringify!($name), " message cannot be sent"
                )))
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct TagVisitor;
                impl<'de> serde::de::Visitor<'de> for TagVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a tagged ", stringify!($name), " message"))
                    }
                    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<$name, A::Error> {
                        let tag: u16 = seq
                            .next_element()?
                            .ok_or_else(|| serde::de::Error::invalid_length(0, &self))?;
                        $( $crate::tagged::tagged_enum!(@de seq tag $name $var $tag $(($ty))?); )+
                        Ok($name::Unknown { tag })
                    }
                }
                deserializer.deserialize_tuple(2, TagVisitor)
            }
        }
    };

    (@ser $me:ident $tuple:ident $name:ident $var:ident $tag:literal) => {
        if let $name::$var = $me {
            $tuple.serialize_element(&($tag as u16))?;
            return $tuple.end();
        }
    };
    (@ser $me:ident $tuple:ident $name:ident $var:ident $tag:literal ($ty:ty)) => {
        if let $name::$var(payload) = $me {
            $tuple.serialize_element(&($tag as u16))?;
            $tuple.serialize_element(payload)?;
            return $tuple.end();
        }
    };
    (@de $seq:ident $got:ident $name:ident $var:ident $tag:literal) => {
        if $got == $tag {
            return Ok($name::$var);
        }
    };
    (@de $seq:ident $got:ident $name:ident $var:ident $tag:literal ($ty:ty)) => {
        if $got == $tag {
            let payload: $ty = $seq
                .next_element()?
                .ok_or_else(|| serde::de::Error::invalid_length(1, &"a message payload"))?;
            return Ok($name::$var(payload));
        }
    };
}

/// Defines a `u16` code enum with an `Unknown(u16)` variant, encoded on the
/// wire as the bare number.
macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $code:literal => $var:ident
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(from = "u16", into = "u16")]
        #[non_exhaustive]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $var,
            )+
            /// A code this build does not know (sent by a newer peer).
            Unknown(u16),
        }

        impl $name {
            /// Every variant this build knows.
            pub const ALL: &'static [$name] = &[$($name::$var),+];

            /// The number sent on the wire.
            pub fn code(self) -> u16 {
                match self {
                    $( $name::$var => $code, )+
                    $name::Unknown(code) => code,
                }
            }
        }

        impl From<u16> for $name {
            fn from(code: u16) -> Self {
                match code {
                    $( $code => $name::$var, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for u16 {
            fn from(value: $name) -> u16 {
                value.code()
            }
        }
    };
}

pub(crate) use code_enum;
pub(crate) use tagged_enum;
