//! `Invalid`: why one value is invalid, what the field checks return before the field is named.

/// Why one value is invalid, in words that follow the field's name (`must not be empty`): what
/// the field checks return, made a [`FieldError`] once the field is known.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(String);

impl From<String> for Invalid {
    fn from(why: String) -> Invalid {
        Invalid(why)
    }
}

impl From<&str> for Invalid {
    fn from(why: &str) -> Invalid {
        Invalid(why.to_string())
    }
}

impl From<Invalid> for String {
    fn from(i: Invalid) -> String {
        i.0
    }
}
