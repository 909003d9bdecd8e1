//! Token and cost accounting.

use serde::{Deserialize, Serialize};

/// Token usage of model calls a tool made (pi's `Usage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Tokens read from the prompt cache.
    pub cache_read: f64,
    /// Tokens written to the prompt cache.
    pub cache_write: f64,
    /// Tokens written to the one-hour prompt cache, when the provider reports them.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "cacheWrite1h")]
    pub cache_write_1h: Option<f64>,
    /// Reasoning tokens, when the provider reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<f64>,
    /// All tokens.
    pub total_tokens: f64,
    /// What the tokens cost.
    pub cost: Cost,
}

/// The cost of a [`Usage`], per kind of token.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    /// Cost of input tokens.
    pub input: f64,
    /// Cost of output tokens.
    pub output: f64,
    /// Cost of cache reads.
    pub cache_read: f64,
    /// Cost of cache writes.
    pub cache_write: f64,
    /// Total cost.
    pub total: f64,
    /// Whether the total came from the provider rather than being computed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_from_provider: Option<bool>,
}

impl Usage {
    /// pi's `combineUsage`: every numeric field summed; `cacheWrite1h` and `reasoning` present only when either
    /// side has them (a missing side counts as 0); `cost.totalFromProvider` true only when both sides are true.
    pub fn combine(&self, other: &Usage) -> Usage {
        Usage {
            input: self.input + other.input,
            output: self.output + other.output,
            cache_read: self.cache_read + other.cache_read,
            cache_write: self.cache_write + other.cache_write,
            cache_write_1h: sum_optional(self.cache_write_1h, other.cache_write_1h),
            reasoning: sum_optional(self.reasoning, other.reasoning),
            total_tokens: self.total_tokens + other.total_tokens,
            cost: Cost {
                input: self.cost.input + other.cost.input,
                output: self.cost.output + other.cost.output,
                cache_read: self.cost.cache_read + other.cost.cache_read,
                cache_write: self.cost.cache_write + other.cost.cache_write,
                total: self.cost.total + other.cost.total,
                total_from_provider: Some(
                    self.cost.total_from_provider == Some(true)
                        && other.cost.total_from_provider == Some(true),
                ),
            },
        }
    }
}

fn sum_optional(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_sums_and_keeps_optional_fields_only_when_present() {
        let a = Usage {
            input: 1.0,
            output: 2.0,
            total_tokens: 3.0,
            reasoning: Some(4.0),
            ..Default::default()
        };
        let b = Usage {
            input: 10.0,
            cache_read: 5.0,
            total_tokens: 15.0,
            ..Default::default()
        };
        let c = a.combine(&b);
        assert_eq!(c.input, 11.0);
        assert_eq!(c.cache_read, 5.0);
        assert_eq!(c.total_tokens, 18.0);
        assert_eq!(c.reasoning, Some(4.0));
        assert_eq!(c.cache_write_1h, None);
        assert_eq!(c.cost.total_from_provider, Some(false));
    }

    #[test]
    fn total_from_provider_needs_both_sides() {
        let mut a = Usage::default();
        a.cost.total_from_provider = Some(true);
        assert_eq!(a.combine(&a).cost.total_from_provider, Some(true));
        assert_eq!(a.combine(&Usage::default()).cost.total_from_provider, Some(false));
    }
}
