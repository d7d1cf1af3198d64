//! The server's limits: how long a statement may be, how deeply its expressions may nest and
//! how much memory one query may use. Each refuses what is over it with a clear error instead
//! of letting one statement take the server down.

/// `--max-statement-size`'s default: far above what people and tools write, small enough that
/// parsing never needs much memory.
pub const DEFAULT_MAX_STATEMENT_SIZE: usize = 4 << 20;

/// Parses a size: bytes, or a number with `KiB`, `MiB` or `GiB` (also `K`, `M`, `G`, `KB`...).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number
        .parse()
        .map_err(|_| format!("\"{text}\" is not a size (e.g. 4MiB, 512KiB, 1048576)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => {
            return Err(format!(
                "unknown size unit \"{other}\" (use KiB, MiB or GiB)"
            ))
        }
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("\"{text}\" is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("512 KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("4PiB").is_err());
    }
}
