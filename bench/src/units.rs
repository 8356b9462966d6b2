//! The size and duration arguments of the command line (`4KiB`, `20s`), shared with
//! `saker server`.

use std::time::Duration;

/// Parses durations like `20s`, `500ms`, `10m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map(|i| s.split_at(i))
        .unwrap_or((s, "s"));
    let n: f64 = num.parse().map_err(|_| format!("bad duration '{s}'"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("bad duration unit in '{s}' (use ms, s, m, h)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// Parses sizes like `4KiB`, `1MiB`, `65536`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let i = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(i);
    let n: u64 = num.parse().map_err(|_| format!("bad size '{s}'"))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        "g" | "gb" | "gib" => 1024 * 1024 * 1024,
        _ => return Err(format!("bad size unit in '{s}' (use KiB, MiB, GiB)")),
    };
    Ok(n * mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("20s").unwrap(), Duration::from_secs(20));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("3 parsecs").is_err());
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("1PB").is_err());
    }
}
