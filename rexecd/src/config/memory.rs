//! The config keys of per-rank memory: `max_mem_per_rank` (the most one rank may ask
//! for with `--mem`; unset: no ceiling) and `default_mem_per_rank` (what a rank gets
//! that asks for none; unset: `max_mem_per_rank`, else no limit), both sizes such as
//! `"4G"` ([`proto::size`]). [`MemoryConfig::for_rank`] applies them to one launch.

use proto::node::{ErrorCode, ErrorReply};
use proto::size::{format_size, parse_size};

use super::ConfigError;

/// The node's memory rules for ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryConfig {
    /// The most a rank may ask for, bytes.
    pub max_per_rank: Option<u64>,
    /// What a rank that asks for nothing gets, bytes.
    pub default_per_rank: Option<u64>,
}

impl MemoryConfig {
    /// Parses and checks the two keys (the default may not exceed the maximum).
    ///
    /// ```
    /// use rexecd::config::memory::MemoryConfig;
    /// let m = MemoryConfig::resolve(Some("4G".into()), None).unwrap();
    /// assert_eq!((m.max_per_rank, m.default_per_rank), (Some(4 << 30), Some(4 << 30)));
    /// assert!(MemoryConfig::resolve(Some("1G".into()), Some("2G".into())).is_err());
    /// ```
    pub fn resolve(max: Option<String>, default: Option<String>) -> Result<Self, ConfigError> {
        let size = |key: &'static str, text: Option<String>| {
            text.map(|t| {
                parse_size(&t).map_err(|e| ConfigError::Invalid {
                    key,
                    value: t.clone(),
                    reason: e.to_string(),
                })
            })
            .transpose()
        };
        let max_per_rank = size("max_mem_per_rank", max)?;
        let default_per_rank = size("default_mem_per_rank", default)?.or(max_per_rank);
        if let (Some(max), Some(default)) = (max_per_rank, default_per_rank)
            && default > max
        {
            return Err(ConfigError::Invalid {
                key: "default_mem_per_rank",
                value: format_size(default),
                reason: format!("is above max_mem_per_rank ({})", format_size(max)),
            });
        }
        Ok(MemoryConfig {
            max_per_rank,
            default_per_rank,
        })
    }

    /// The limit for a rank that asked for `asked` bytes on node `node`: what it asked
    /// (refused with [`ErrorCode::OverLimit`] above the maximum), else the default.
    pub fn for_rank(&self, asked: Option<u64>, node: &str) -> Result<Option<u64>, ErrorReply> {
        match (asked, self.max_per_rank) {
            (Some(0), _) => Err(ErrorReply::new(
                ErrorCode::BadRequest,
                format!("node {node}: --mem 0 is not a memory limit; ask for more than zero"),
            )),
            (Some(asked), Some(max)) if asked > max => Err(ErrorReply::new(
                ErrorCode::OverLimit,
                format!(
                    "node {node}: --mem {} is above this node's max_mem_per_rank of {}; ask for {} or less",
                    format_size(asked),
                    format_size(max),
                    format_size(max)
                ),
            )),
            (Some(asked), _) => Ok(Some(asked)),
            (None, _) => Ok(self.default_per_rank),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_above_the_maximum_are_refused_naming_it() {
        let m = MemoryConfig::resolve(Some("1G".into()), Some("256M".into())).unwrap();
        assert_eq!(m.for_rank(None, "n1").unwrap(), Some(256 << 20));
        assert_eq!(m.for_rank(Some(1 << 30), "n1").unwrap(), Some(1 << 30));
        let err = m.for_rank(Some(2 << 30), "n1").unwrap_err();
        assert_eq!(err.code, ErrorCode::OverLimit);
        assert!(
            err.message.contains("n1") && err.message.contains("2G") && err.message.contains("1G"),
            "{}",
            err.message
        );
        let none = MemoryConfig::resolve(None, None).unwrap();
        assert_eq!(none.for_rank(None, "n1").unwrap(), None);
        assert_eq!(none.for_rank(Some(5 << 40), "n1").unwrap(), Some(5 << 40));
        assert!(MemoryConfig::resolve(Some("lots".into()), None).is_err());
    }
}
