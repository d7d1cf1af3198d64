//! Every payload is checked before a decoder reads it: what a decoder would recurse on too
//! deeply, or read leniently, is a dead letter with the reason, never a crash.
//!
//! JSON must be one object, checked with serde_json, strictly (a trailing comma, a missing
//! comma or anything after the object is refused: the Arrow decoder skips such commas), and
//! nested less than [`MAX_NESTING`] levels: the Arrow decoder walks a value recursively when it
//! reports an error in it, so a line of 100,000 `[` overflowed its thread's stack. Neither
//! check recurses: the nesting is counted by one pass over the bytes, and serde_json skips a
//! value it is not asked to build with a loop. (Building each value through a visitor, to let
//! serde_json count the nesting, took a quarter of a TUMBLE view's CPU.) CSV has no nesting: a
//! field is text up to the next delimiter, read by a state machine.

use serde::de::IgnoredAny;

use super::Encode;

/// Arrays and objects nested this deep in a JSON payload are refused (127 levels pass).
pub const MAX_NESTING: usize = 128;

/// Why `payload` must not reach the decoder of `encode`, if it must not.
pub fn refusal(encode: &Encode, payload: &[u8]) -> Option<String> {
    match encode {
        Encode::Json => strict_json(payload).err(),
        Encode::Csv { .. } | Encode::Avro { .. } | Encode::Protobuf { .. } => None,
    }
}

fn strict_json(payload: &[u8]) -> Result<(), String> {
    if payload.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("not a JSON object".into());
    }
    // Fewer opening brackets than the limit cannot nest that deep (SIMD counting; the scan
    // below runs on the rare payload with that many).
    let openers = memchr::memchr2_iter(b'[', b'{', payload)
        .take(MAX_NESTING)
        .count();
    if let Some(at) = (openers >= MAX_NESTING)
        .then(|| too_deep_at(payload))
        .flatten()
    {
        return Err(format!(
            "JSON nested {MAX_NESTING} levels deep or deeper (at column {})",
            at + 1
        ));
    }
    match serde_json::from_slice::<IgnoredAny>(payload) {
        Ok(_) => Ok(()),
        Err(error) if after_trailing_comma(payload, error.column()) => Err(format!(
            "invalid JSON: trailing comma at line {} column {}",
            error.line(),
            error.column()
        )),
        Err(error) => Err(format!("invalid JSON: {error}")),
    }
}

/// Whether the error at (1-based) `column` is a closing bracket right after a comma: serde_json
/// skipping a value calls that "key must be a string" or "expected value".
fn after_trailing_comma(payload: &[u8], column: usize) -> bool {
    let at = column.saturating_sub(1);
    matches!(payload.get(at), Some(b'}' | b']'))
        && payload[..at]
            .iter()
            .rev()
            .find(|b| !b.is_ascii_whitespace())
            == Some(&b',')
}

/// Where the payload's arrays and objects reach [`MAX_NESTING`] levels, if they do (brackets
/// inside strings do not count).
fn too_deep_at(payload: &[u8]) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (at, &byte) in payload.iter().enumerate() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth >= MAX_NESTING {
                    return Some(at);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
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
        for (payload, reason) in [
            ("{\"id\":36,}", "trailing comma at line 1 column 10"),
            ("{\"id\":[1,2, ]}", "trailing comma at line 1 column 13"),
        ] {
            let refused = refusal(&Encode::Json, payload.as_bytes()).expect(payload);
            assert!(refused.contains(reason), "{refused}");
        }
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
            // Brackets in strings are text, however many.
            format!("{{\"a\":\"{}\\\"{}\"}}", "[".repeat(500), "{".repeat(500)).as_str(),
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
