//! Run-time knobs of a software provider, read from the environment and documented in a list
//! that `nd info` prints (the `fi_info -e` convention).

/// One documented environment variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// The default, as text.
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

/// The value of environment variable `name` (surrounding white space ignored), or `default`
/// when it is unset or does not parse as a `T`. The caller clamps it to its valid range.
pub fn var<T: std::str::FromStr>(name: &str, default: T) -> T {
    parse_or(std::env::var(name).ok().as_deref(), default)
}

fn parse_or<T: std::str::FromStr>(value: Option<&str>, default: T) -> T {
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_or_garbage_gives_the_default() {
        assert_eq!(parse_or::<u32>(None, 5), 5);
        assert_eq!(parse_or::<u32>(Some("12x"), 5), 5);
        assert_eq!(parse_or::<u32>(Some(" 12\n"), 5), 12);
        assert_eq!(var::<u32>("ND_KIT_CONFIG_TEST_NEVER_SET", 7), 7);
    }
}
