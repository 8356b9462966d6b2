//! Wildcard matching of actions, ARNs and condition values (`*` any run of characters,
//! `?` one character, both crossing `/` and `:`), and policy variables (`${aws:username}`,
//! `${s3:prefix, 'default'}`, and the escapes `${*}`, `${?}`, `${$}`).

/// Where policy variables take their values: a lowercased condition key's single value.
pub(crate) trait Vars {
    fn var(&self, key: &str) -> Option<&str>;
}

#[cfg(test)]
impl<F: Fn(&str) -> Option<&'static str>> Vars for F {
    fn var(&self, key: &str) -> Option<&str> {
        self(key)
    }
}

/// One element of a compiled pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Lit(char),
    Star,
    One,
}

/// Whether `value` matches `pattern` (case-sensitive; `*` and `?` are wildcards).
pub fn wildcard_match(pattern: &str, value: &str) -> bool {
    matches_str(pattern, value, false)
}

/// [`wildcard_match`] ignoring case (actions, `StringEqualsIgnoreCase`-like uses).
pub fn wildcard_match_ignore_case(pattern: &str, value: &str) -> bool {
    matches_str(pattern, value, true)
}

/// Whether `pattern` matches `value` after substituting policy variables from `var` (given a
/// lowercased condition key, its single value). A variable the request lacks and that has no
/// default makes the pattern match nothing (AWS). Substituted text is literal: a `*` in a
/// user name is not a wildcard.
pub(crate) fn match_with_vars(
    pattern: &str,
    value: &str,
    ignore_case: bool,
    var: Option<&dyn Vars>,
) -> bool {
    match var {
        Some(var) if pattern.contains("${") => match expand(pattern, var) {
            Some(toks) => matches(&toks, value, ignore_case),
            None => false,
        },
        _ => matches_str(pattern, value, ignore_case),
    }
}

/// Substitutes policy variables and returns the literal text (for exact comparisons).
/// `None` when a variable is missing.
pub(crate) fn substitute(pattern: &str, var: Option<&dyn Vars>) -> Option<String> {
    match var {
        Some(var) if pattern.contains("${") => Some(
            expand(pattern, var)?
                .into_iter()
                .map(|t| match t {
                    Tok::Lit(c) => c,
                    Tok::Star => '*',
                    Tok::One => '?',
                })
                .collect(),
        ),
        _ => Some(pattern.to_string()),
    }
}

fn compile(pattern: &str) -> Vec<Tok> {
    pattern
        .chars()
        .map(|c| match c {
            '*' => Tok::Star,
            '?' => Tok::One,
            c => Tok::Lit(c),
        })
        .collect()
}

/// Compiles `pattern`, replacing `${…}` by its literal value.
fn expand(pattern: &str, var: &dyn Vars) -> Option<Vec<Tok>> {
    let mut out = Vec::with_capacity(pattern.len());
    let mut rest = pattern;
    while let Some(start) = rest.find("${") {
        out.extend(compile(&rest[..start]));
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            // Unclosed: literal text.
            out.extend(compile(&rest[start..]));
            return Some(out);
        };
        let inner = &after[..end];
        match inner {
            "*" | "?" | "$" => out.push(Tok::Lit(inner.chars().next().unwrap_or('$'))),
            _ => {
                let (name, default) = match inner.split_once(',') {
                    Some((n, d)) => (n.trim(), Some(d.trim().trim_matches('\''))),
                    None => (inner.trim(), None),
                };
                let value = var.var(&name.to_ascii_lowercase()).or(default)?;
                out.extend(value.chars().map(Tok::Lit));
            }
        }
        rest = &after[end + 1..];
    }
    out.extend(compile(rest));
    Some(out)
}

fn char_eq(a: char, b: char, ignore_case: bool) -> bool {
    a == b
        || (ignore_case
            && if a.is_ascii() && b.is_ascii() {
                a.eq_ignore_ascii_case(&b)
            } else {
                a.to_lowercase().eq(b.to_lowercase())
            })
}

/// The character at byte `i` of `s` and its length.
fn char_at(s: &str, i: usize) -> (char, usize) {
    let c = s[i..]
        .chars()
        .next()
        .expect("i is a char boundary inside s");
    (c, c.len_utf8())
}

/// [`matches`] for a pattern without substituted text, straight over the two strings (no
/// allocation: this runs for every statement of every evaluated request).
fn matches_str(pattern: &str, value: &str, ignore_case: bool) -> bool {
    let (mut p, mut s) = (0, 0);
    // After a `*`: the pattern position following it, and the value position it resumes at.
    let mut star: Option<(usize, usize)> = None;
    while s < value.len() {
        if p < pattern.len() {
            let (pc, pl) = char_at(pattern, p);
            let (vc, vl) = char_at(value, s);
            match pc {
                '*' => {
                    star = Some((p + 1, s));
                    p += 1;
                    continue;
                }
                '?' => {
                    p += 1;
                    s += vl;
                    continue;
                }
                c if char_eq(c, vc, ignore_case) => {
                    p += pl;
                    s += vl;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, ss)) => {
                let (_, vl) = char_at(value, ss);
                star = Some((sp, ss + vl));
                p = sp;
                s = ss + vl;
            }
            None => return false,
        }
    }
    pattern[p..].bytes().all(|b| b == b'*')
}

/// Greedy matching with one backtrack point: O(pattern × value) at worst.
fn matches(toks: &[Tok], value: &str, ignore_case: bool) -> bool {
    let v: Vec<char> = value.chars().collect();
    let (mut p, mut s) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while s < v.len() {
        match toks.get(p) {
            Some(Tok::Star) => {
                star = Some((p, s));
                p += 1;
            }
            Some(Tok::One) => {
                p += 1;
                s += 1;
            }
            Some(Tok::Lit(c)) if char_eq(*c, v[s], ignore_case) => {
                p += 1;
                s += 1;
            }
            _ => match star {
                Some((sp, ss)) => {
                    star = Some((sp, ss + 1));
                    p = sp + 1;
                    s = ss + 1;
                }
                None => return false,
            },
        }
    }
    toks[p..].iter().all(|t| *t == Tok::Star)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        let cases = [
            ("*", "", true),
            ("*", "anything/at:all", true),
            ("", "", true),
            ("", "a", false),
            ("s3:Get*", "s3:GetObject", true),
            ("s3:Get*", "s3:PutObject", false),
            ("s3:*Object", "s3:GetObject", true),
            ("s3:*Object", "s3:GetObjectAcl", false),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::b/x/y", true),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::b", false),
            ("arn:aws:s3:::b*", "arn:aws:s3:::bb/k", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a?c", "aéc", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
            ("abc", "ABC", false),
        ];
        for (p, v, want) in cases {
            assert_eq!(wildcard_match(p, v), want, "{p:?} vs {v:?}");
            assert_eq!(
                matches(&compile(p), v, false),
                want,
                "tokens: {p:?} vs {v:?}"
            );
        }
        assert!(wildcard_match_ignore_case("S3:get*", "s3:GetObject"));
        assert!(!wildcard_match_ignore_case("s3:get*", "s3:PutObject"));
    }

    #[test]
    fn variables() {
        let vars = |k: &str| match k {
            "aws:username" => Some("alice"),
            "weird" => Some("a*"),
            _ => None,
        };
        let var: &dyn Vars = &vars;
        let cases = [
            ("home/${aws:username}/*", "home/alice/x", true),
            ("home/${aws:username}/*", "home/bob/x", false),
            ("home/${AWS:UserName}/*", "home/alice/x", true),
            ("home/${aws:userid}/*", "home/alice/x", false),
            ("home/${aws:userid, 'anon'}/*", "home/anon/x", true),
            ("lit${*}", "lit*", true),
            ("lit${*}", "litX", false),
            ("${weird}", "abc", false),
            ("${weird}", "a*", true),
            ("open${", "open${", true),
        ];
        for (p, v, want) in cases {
            assert_eq!(
                match_with_vars(p, v, false, Some(var)),
                want,
                "{p:?} vs {v:?}"
            );
        }
        // Without variables enabled, `${…}` is literal text.
        assert!(!match_with_vars(
            "home/${aws:username}",
            "home/alice",
            false,
            None
        ));
        assert_eq!(
            substitute("u/${aws:username}", Some(var)).as_deref(),
            Some("u/alice")
        );
        assert_eq!(substitute("u/${nope}", Some(var)), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn the_string_matcher_agrees_with_the_token_matcher(
            p in "[aAbé*?/]{0,8}",
            v in "[aAbé/]{0,10}",
            ignore_case: bool,
        ) {
            proptest::prop_assert_eq!(
                matches_str(&p, &v, ignore_case),
                matches(&compile(&p), &v, ignore_case)
            );
        }
    }
}
