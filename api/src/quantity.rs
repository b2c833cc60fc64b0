//! Resource quantities such as `256Mi`, `4Gi`, `1G` or `512`.

use std::fmt;
use std::str::FromStr;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A byte quantity, kept in the form it was written and as a number of bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    text: String,
    bytes: u64,
}

pub const QUANTITY_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$";

impl Quantity {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl FromStr for Quantity {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!("invalid quantity `{s}`: use a number with an optional suffix (Ki, Mi, Gi, Ti, Pi, k, M, G, T, P), such as `256Mi` or `4Gi`")
        };
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (num, suffix) = s.split_at(split);
        let mult: u64 = match suffix {
            "" => 1,
            "Ki" => 1 << 10,
            "Mi" => 1 << 20,
            "Gi" => 1 << 30,
            "Ti" => 1 << 40,
            "Pi" => 1 << 50,
            "k" => 1_000,
            "M" => 1_000_000,
            "G" => 1_000_000_000,
            "T" => 1_000_000_000_000,
            "P" => 1_000_000_000_000_000,
            _ => return Err(bad()),
        };
        if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1 {
            return Err(bad());
        }
        let value: f64 = num.parse().map_err(|_| bad())?;
        let bytes = value * mult as f64;
        if !bytes.is_finite() || bytes > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(Quantity { text: s.to_string(), bytes: bytes.round() as u64 })
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity such as `256Mi` or `4Gi`")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Quantity, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Quantity, E> {
                Ok(Quantity { text: n.to_string(), bytes: n })
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": QUANTITY_PATTERN, "examples": ["256Mi", "4Gi"]})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!("256Mi".parse::<Quantity>().unwrap().bytes(), 256 << 20);
        assert_eq!("4Gi".parse::<Quantity>().unwrap().bytes(), 4 << 30);
        assert_eq!("1.5Gi".parse::<Quantity>().unwrap().bytes(), 3 << 29);
        assert_eq!("1G".parse::<Quantity>().unwrap().bytes(), 1_000_000_000);
        assert_eq!("512".parse::<Quantity>().unwrap().bytes(), 512);
    }

    #[test]
    fn rejects() {
        for s in ["", "Gi", "4GB", "4 Gi", "-1Gi", "1..2Mi", ".5Gi", "4gi"] {
            assert!(s.parse::<Quantity>().is_err(), "{s}");
        }
    }
}
