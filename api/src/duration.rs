//! Durations written as `500ms`, `30s`, `10m`, `2h`, `1h30m` or `1d`.

use std::fmt;
use std::str::FromStr;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative duration in the manifest syntax.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub std::time::Duration);

pub const DURATION_PATTERN: &str = r"^([0-9]+(ms|s|m|h|d))+$";

impl Duration {
    pub const fn from_secs(s: u64) -> Duration {
        Duration(std::time::Duration::from_secs(s))
    }
    pub fn as_std(self) -> std::time::Duration {
        self.0
    }
}

impl FromStr for Duration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!("invalid duration `{s}`: use a number and a unit (ms, s, m, h, d), such as `30s`, `10m` or `1h30m`")
        };
        if s.is_empty() {
            return Err(bad());
        }
        let mut total_ms: u128 = 0;
        let mut rest = s;
        while !rest.is_empty() {
            let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return Err(bad());
            }
            let n: u128 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let (unit_ms, len) = if rest.starts_with("ms") {
                (1, 2)
            } else if rest.starts_with('s') {
                (1_000, 1)
            } else if rest.starts_with('m') {
                (60_000, 1)
            } else if rest.starts_with('h') {
                (3_600_000, 1)
            } else if rest.starts_with('d') {
                (86_400_000, 1)
            } else {
                return Err(bad());
            };
            rest = &rest[len..];
            total_ms = total_ms.checked_add(n.checked_mul(unit_ms).ok_or_else(bad)?).ok_or_else(bad)?;
        }
        let ms = u64::try_from(total_ms).map_err(|_| bad())?;
        Ok(Duration(std::time::Duration::from_millis(ms)))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0.as_millis();
        if ms == 0 {
            return f.write_str("0s");
        }
        for (unit, len) in [("d", 86_400_000u128), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
            if ms >= len {
                write!(f, "{}{unit}", ms / len)?;
                ms %= len;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": DURATION_PATTERN, "examples": ["30s", "10m", "2h"]})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        for (s, ms) in [
            ("30s", 30_000),
            ("10m", 600_000),
            ("2h", 7_200_000),
            ("1h30m", 5_400_000),
            ("500ms", 500),
            ("1d", 86_400_000),
        ] {
            let d: Duration = s.parse().unwrap();
            assert_eq!(d.0.as_millis(), ms, "{s}");
            assert_eq!(d.to_string(), s);
        }
        assert_eq!("90s".parse::<Duration>().unwrap().to_string(), "1m30s");
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "10", "m", "10x", "1.5h", "-1s", "10 m", "99999999999999999999d"] {
            assert!(s.parse::<Duration>().is_err(), "{s}");
        }
    }
}
