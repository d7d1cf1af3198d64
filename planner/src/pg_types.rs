//! Postgres types Eddy holds as another Arrow type (`varchar`, `json`, `jsonb`, `uuid` as
//! strings): the field metadata that names them, and the text form of a `uuid`, which both
//! the server (casts, writes, parameters) and the connectors (a source's `uuid` column) read.

use datafusion::arrow::datatypes::Field;

/// The field metadata naming the Postgres type (`varchar`, `json`, `jsonb`, `uuid`).
pub const PG_TYPE_KEY: &str = "eddy.pg_type";

/// Whether a field holds `uuid`s (canonical text).
pub fn is_uuid(field: &Field) -> bool {
    field.metadata().get(PG_TYPE_KEY).map(String::as_str) == Some("uuid")
}

/// The 16 bytes of a uuid written as Postgres reads one: 32 hex digits, either case, a hyphen
/// allowed after any group of four, the whole optionally in braces.
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let mut rest = text.as_bytes();
    let braces = rest.first() == Some(&b'{');
    if braces {
        rest = &rest[1..];
    }
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let (high, low) = (hex_digit(*rest.first()?)?, hex_digit(*rest.get(1)?)?);
        *byte = high << 4 | low;
        rest = &rest[2..];
        if rest.first() == Some(&b'-') && i % 2 == 1 && i < 15 {
            rest = &rest[1..];
        }
    }
    if braces {
        rest = rest.strip_prefix(b"}")?;
    }
    rest.is_empty().then_some(bytes)
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// The canonical text of 16 bytes: `a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11`, which sorts as the
/// bytes do.
pub fn uuid_text(bytes: &[u8; 16]) -> String {
    let mut text = String::with_capacity(36);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_postgres_reads_is_read() {
        let canonical = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11";
        // The forms Postgres' documentation lists for uuid input.
        for input in [
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            canonical,
        ] {
            let bytes = parse_uuid(input).unwrap_or_else(|| panic!("{input}"));
            assert_eq!(uuid_text(&bytes), canonical, "{input}");
        }
    }

    #[test]
    fn what_postgres_refuses_is_refused() {
        for input in [
            "",
            "a0eebc99",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111",
            "a0eebc9-99c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        ] {
            assert_eq!(parse_uuid(input), None, "{input}");
        }
    }

    #[test]
    fn canonical_text_orders_as_the_bytes_do() {
        let mut bytes: Vec<[u8; 16]> = (0..64u8)
            .map(|i| {
                let mut b = [0u8; 16];
                b[0] = i.wrapping_mul(37);
                b[7] = 255 - i;
                b[15] = i;
                b
            })
            .collect();
        let mut texts: Vec<String> = bytes.iter().map(uuid_text).collect();
        bytes.sort();
        texts.sort();
        assert_eq!(texts, bytes.iter().map(uuid_text).collect::<Vec<_>>());
    }
}
