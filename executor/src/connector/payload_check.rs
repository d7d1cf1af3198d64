//! Every payload is checked before a decoder reads it: what a decoder would recurse on too
//! deeply, or read leniently, is a dead letter with the reason, never a crash.
//!
//! JSON must be one object, checked with serde_json, strictly (a trailing comma, a missing
//! comma or anything after the object is refused: the Arrow decoder skips such commas), and
//! nested less than [`MAX_NESTING`] levels: the Arrow decoder walks a value recursively when it
//! reports an error in it, so a line of 100,000 `[` overflowed its thread's stack. The check
//! itself recurses at most that deep. CSV has no nesting: a field is text up to the next
//! delimiter, read by a state machine.

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::Encode;

/// Arrays and objects nested this deep in a JSON payload are refused (serde_json's own limit:
/// 127 levels pass).
pub const MAX_NESTING: usize = 128;

/// Why `payload` must not reach the decoder of `encode`, if it must not.
pub fn refusal(encode: &Encode, payload: &[u8]) -> Option<String> {
    match encode {
        Encode::Json => strict_json(payload).err(),
        Encode::Csv { .. } => None,
    }
}

fn strict_json(payload: &[u8]) -> Result<(), String> {
    if payload.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("not a JSON object".into());
    }
    match serde_json::from_slice::<Skipped>(payload) {
        Ok(Skipped) => Ok(()),
        Err(error) if error.to_string().starts_with("recursion limit exceeded") => Err(format!(
            "JSON nested {MAX_NESTING} levels deep or deeper (at column {})",
            error.column()
        )),
        Err(error) => Err(format!("invalid JSON: {error}")),
    }
}

/// Any JSON value, read and dropped. Unlike `IgnoredAny` (which serde_json skips without a
/// depth limit) it asks for each value's contents, so serde_json counts the nesting.
struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkippedVisitor)
    }
}

struct SkippedVisitor;

impl<'de> Visitor<'de> for SkippedVisitor {
    type Value = Skipped;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skipped, E> {
        Ok(Skipped)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Skipped, E> {
        Ok(Skipped)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Skipped, E> {
        Ok(Skipped)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Skipped, E> {
        Ok(Skipped)
    }

    fn visit_str<E>(self, _: &str) -> Result<Skipped, E> {
        Ok(Skipped)
    }

    fn visit_unit<E>(self) -> Result<Skipped, E> {
        Ok(Skipped)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Skipped, A::Error> {
        while items.next_element::<Skipped>()?.is_some() {}
        Ok(Skipped)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Skipped, A::Error> {
        while entries.next_key::<IgnoredAny>()?.is_some() {
            entries.next_value::<Skipped>()?;
        }
        Ok(Skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> Vec<u8> {
        format!("{{\"id\":{}1{}}}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
    }

    #[test]
    fn deep_nesting_is_refused_without_recursing_that_deep() {
        // The object and its arrays: 127 levels in all pass, 128 do not.
        assert_eq!(refusal(&Encode::Json, &nested(MAX_NESTING - 2)), None);
        for depth in [MAX_NESTING - 1, 20_000, 100_000] {
            let reason = refusal(&Encode::Json, &nested(depth)).expect("refused");
            assert!(
                reason.contains("nested 128 levels deep or deeper"),
                "{reason}"
            );
        }
    }

    #[test]
    fn lenient_json_is_refused() {
        for payload in [
            "{\"id\":36,}",
            "{\"id\":[1,2,]}",
            "{\"id\":1 \"x\":2}",
            "{\"id\":1}}",
            "{\"id\":1} x",
            "{\"id\":01}",
        ] {
            assert!(
                refusal(&Encode::Json, payload.as_bytes()).is_some(),
                "{payload}"
            );
        }
        for payload in [
            "{\"id\":36}",
            " {\"a\": [1, {\"b\": null}], \"c\": \"x\\\"\"}\n",
        ] {
            assert_eq!(
                refusal(&Encode::Json, payload.as_bytes()),
                None,
                "{payload}"
            );
        }
    }

    #[test]
    fn csv_has_no_nesting_to_refuse() {
        let csv = Encode::Csv {
            delimiter: b',',
            header: false,
        };
        assert_eq!(refusal(&csv, "1,[[[[[[".as_bytes()), None);
    }
}
