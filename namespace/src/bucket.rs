//! S3 bucket naming rules (general purpose buckets); a bucket is the top-level directory `/b`.

/// Why a string is not a valid S3 bucket name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BucketNameError {
    #[error("bucket name must be 3 to 63 characters long, not {0}")]
    Length(usize),
    #[error("bucket name may contain only lowercase letters, digits, '.' and '-', not {0:?}")]
    InvalidChar(char),
    #[error("bucket name must begin and end with a lowercase letter or digit")]
    BadEdge,
    #[error("bucket name must not contain two adjacent periods")]
    DoubleDot,
    #[error("bucket name must not be formatted as an IP address")]
    IpAddress,
    #[error("bucket name must not start with 'xn--'")]
    XnPrefix,
    #[error("bucket name must not end with '{0}'")]
    ReservedSuffix(&'static str),
}

const RESERVED_SUFFIXES: [&str; 2] = ["-s3alias", "--ol-s3"];

/// Checks `s` against S3's bucket naming rules: 3–63 characters of `a-z`, `0-9`, `.` and `-`;
/// begins and ends with a letter or digit; no `..`; not four dot-separated groups of 1–3 digits
/// (IPv4-like); no `xn--` prefix; no `-s3alias` or `--ol-s3` suffix.
pub fn validate_bucket_name(s: &str) -> Result<(), BucketNameError> {
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '.' || *c == '-'))
    {
        return Err(BucketNameError::InvalidChar(c));
    }
    // Only ASCII from here on, so bytes == chars.
    if !(3..=63).contains(&s.len()) {
        return Err(BucketNameError::Length(s.len()));
    }
    let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    if !edge_ok(bytes[0]) || !edge_ok(bytes[bytes.len() - 1]) {
        return Err(BucketNameError::BadEdge);
    }
    if s.contains("..") {
        return Err(BucketNameError::DoubleDot);
    }
    if looks_like_ipv4(s) {
        return Err(BucketNameError::IpAddress);
    }
    if s.starts_with("xn--") {
        return Err(BucketNameError::XnPrefix);
    }
    if let Some(suffix) = RESERVED_SUFFIXES.iter().find(|x| s.ends_with(*x)) {
        return Err(BucketNameError::ReservedSuffix(suffix));
    }
    Ok(())
}

fn looks_like_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use BucketNameError::*;

    #[test]
    fn accepts_valid_names() {
        for s in [
            "abc",
            "my-bucket",
            "my.bucket.1",
            "123",
            "1.2.3",
            "1.2.3.4.5",
            "a-s3alia",
            "xn-a",
            &"a".repeat(63),
        ] {
            assert_eq!(validate_bucket_name(s), Ok(()), "{s}");
        }
    }

    #[test]
    fn length() {
        assert_eq!(validate_bucket_name(""), Err(Length(0)));
        assert_eq!(validate_bucket_name("ab"), Err(Length(2)));
        assert_eq!(validate_bucket_name(&"a".repeat(64)), Err(Length(64)));
    }

    #[test]
    fn characters() {
        assert_eq!(validate_bucket_name("aBc"), Err(InvalidChar('B')));
        assert_eq!(validate_bucket_name("a_c"), Err(InvalidChar('_')));
        assert_eq!(validate_bucket_name("a/c"), Err(InvalidChar('/')));
        assert_eq!(validate_bucket_name("abé"), Err(InvalidChar('é')));
    }

    #[test]
    fn edges() {
        for s in ["-abc", "abc-", ".abc", "abc."] {
            assert_eq!(validate_bucket_name(s), Err(BadEdge), "{s}");
        }
    }

    #[test]
    fn double_dot_ip_and_reserved() {
        assert_eq!(validate_bucket_name("a..b"), Err(DoubleDot));
        assert_eq!(validate_bucket_name("192.168.5.4"), Err(IpAddress));
        assert_eq!(validate_bucket_name("1.2.3.4"), Err(IpAddress));
        assert_eq!(validate_bucket_name("xn--abc"), Err(XnPrefix));
        assert_eq!(
            validate_bucket_name("foo-s3alias"),
            Err(ReservedSuffix("-s3alias"))
        );
        assert_eq!(
            validate_bucket_name("foo--ol-s3"),
            Err(ReservedSuffix("--ol-s3"))
        );
    }

    #[test]
    fn messages_are_readable() {
        assert_eq!(
            Length(2).to_string(),
            "bucket name must be 3 to 63 characters long, not 2"
        );
        assert_eq!(
            InvalidChar('B').to_string(),
            "bucket name may contain only lowercase letters, digits, '.' and '-', not 'B'"
        );
    }
}
