//! One text form for a value, whoever printed it: Eddy prints as Postgres does
//! (`2026-01-01 00:00:05.62`, `21`), DataFusion's casts as Arrow does
//! (`2026-01-01T00:00:05.620`, `21.0`). The oracle compares values, not their spelling.

/// `cell` in the form both sides are compared in.
pub fn canonical(cell: &str) -> String {
    if let Some(timestamp) = timestamp(cell) {
        return timestamp;
    }
    if cell.contains(['.', 'e', 'E']) {
        if let Ok(number) = cell.parse::<f64>() {
            return number.to_string();
        }
    }
    cell.to_string()
}

/// `YYYY-MM-DD[T ]HH:MM:SS[.fraction][rest]` with a space between date and time and the
/// fraction without trailing zeros.
fn timestamp(cell: &str) -> Option<String> {
    let bytes = cell.as_bytes();
    let shape_ok = bytes.len() >= 19
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && matches!(bytes[10], b'T' | b' ')
        && bytes[13] == b':'
        && bytes[16] == b':';
    if !shape_ok {
        return None;
    }
    let (date, time) = (&cell[..10], &cell[11..19]);
    let rest = &cell[19..];
    let (fraction, tail) = match rest.strip_prefix('.') {
        Some(after) => {
            let digits = after
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after.len());
            (after[..digits].trim_end_matches('0'), &after[digits..])
        }
        None => ("", rest),
    };
    let dot = if fraction.is_empty() { "" } else { "." };
    Some(format!("{date} {time}{dot}{fraction}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn both_spellings_meet() {
        assert_eq!(
            canonical("2026-01-01T00:00:05.620"),
            "2026-01-01 00:00:05.62"
        );
        assert_eq!(
            canonical("2026-01-01 00:00:05.62"),
            "2026-01-01 00:00:05.62"
        );
        assert_eq!(canonical("2026-01-01T00:00:01"), "2026-01-01 00:00:01");
        assert_eq!(
            canonical("2026-01-01T00:00:01.000+00"),
            "2026-01-01 00:00:01+00"
        );
        assert_eq!(canonical("21.0"), canonical("21"));
        assert_eq!(canonical("1e+20"), canonical("100000000000000000000.0"));
        assert_eq!(canonical("abc"), "abc");
        assert_ne!(canonical("21.5"), canonical("21"));
    }
}
