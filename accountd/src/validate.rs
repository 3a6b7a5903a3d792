//! Checks on every field that arrives from the network before it reaches the
//! ledger: names, job ids, reasons and amounts. Each check returns a typed
//! [`AccountError`] whose message says what was wrong and what is allowed.

use proto::account::{AccountError, ErrorCode};

/// Longest user, node or job name accepted.
pub const MAX_NAME: usize = 64;
/// Longest reason accepted.
pub const MAX_REASON: usize = 500;

/// A user or node name, by the certificate rules (`docs/SECURITY.md`): 1..=64
/// of `a-z 0-9 . _ -`, not starting with `-` or `.`. Job ids (`what == "job"`)
/// may also use upper-case letters.
///
/// ```
/// use accountd::validate::check_name;
/// assert!(check_name("user", "alice").is_ok());
/// assert!(check_name("user", "Alice").is_err());
/// assert!(check_name("job", "J-42").is_ok());
/// assert!(check_name("user", "../etc").is_err());
/// ```
pub fn check_name(what: &str, name: &str) -> Result<(), AccountError> {
    let upper_ok = what == "job";
    let ok_char = |c: char| {
        c.is_ascii_lowercase()
            || c.is_ascii_digit()
            || matches!(c, '.' | '_' | '-')
            || (upper_ok && c.is_ascii_uppercase())
    };
    if name.is_empty()
        || name.len() > MAX_NAME
        || !name.chars().all(ok_char)
        || name.starts_with(['-', '.'])
    {
        let letters = if upper_ok {
            "letters"
        } else {
            "lower-case letters"
        };
        return Err(AccountError::new(
            ErrorCode::Malformed,
            format!(
                "invalid {what} name {:?}: use 1-{MAX_NAME} {letters}, digits, '.', '_' or '-', not starting with '-' or '.'",
                truncate(name)
            ),
        ));
    }
    Ok(())
}

/// A reason: non-empty after trimming, at most 500 bytes, no control characters.
pub fn check_reason(reason: &str) -> Result<(), AccountError> {
    if reason.trim().is_empty() {
        return Err(AccountError::new(
            ErrorCode::Malformed,
            "a reason is required: say why in --reason",
        ));
    }
    if reason.len() > MAX_REASON || reason.chars().any(char::is_control) {
        return Err(AccountError::new(
            ErrorCode::Malformed,
            format!("the reason must be one line of at most {MAX_REASON} bytes"),
        ));
    }
    Ok(())
}

/// An amount that must be positive and at most `max` micro-credits.
pub fn check_positive(amount: i64, max: i64) -> Result<(), AccountError> {
    if amount <= 0 {
        return Err(AccountError::new(
            ErrorCode::InvalidAmount,
            format!(
                "amount {} must be positive",
                money::format_credits_fixed(amount)
            ),
        ));
    }
    check_magnitude(amount, max)
}

/// A signed amount that must be non-zero and at most `max` in magnitude.
pub fn check_nonzero(amount: i64, max: i64) -> Result<(), AccountError> {
    if amount == 0 {
        return Err(AccountError::new(
            ErrorCode::InvalidAmount,
            "amount must not be zero",
        ));
    }
    check_magnitude(amount, max)
}

fn check_magnitude(amount: i64, max: i64) -> Result<(), AccountError> {
    if amount.unsigned_abs() > max.unsigned_abs() {
        return Err(AccountError::new(
            ErrorCode::InvalidAmount,
            format!(
                "amount {} exceeds the per-entry limit of {} credits",
                money::format_credits_fixed(amount),
                money::format_credits_fixed(max)
            ),
        ));
    }
    Ok(())
}

fn truncate(s: &str) -> String {
    s.chars().take(MAX_NAME + 1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["a", "alice", "node-01", "j.42_x", "x9"] {
            assert!(check_name("user", good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_NAME + 1);
        for bad in [
            "",
            "-rf",
            ".hidden",
            "Bob",
            "u@realm",
            "a b",
            "a/b",
            "é",
            "a\n",
            long.as_str(),
        ] {
            let err = check_name("user", bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::Malformed, "{bad}");
        }
    }

    #[test]
    fn reasons_and_amounts() {
        assert!(check_reason("monthly allocation").is_ok());
        assert!(check_reason("   ").is_err());
        assert!(check_reason("two\nlines").is_err());
        assert!(check_positive(1, 10).is_ok());
        assert!(check_positive(0, 10).is_err());
        assert!(check_positive(-1, 10).is_err());
        assert!(check_positive(11, 10).is_err());
        assert!(check_nonzero(-10, 10).is_ok());
        assert!(check_nonzero(i64::MIN, i64::MAX).is_err());
        assert!(check_nonzero(0, 10).is_err());
    }
}
