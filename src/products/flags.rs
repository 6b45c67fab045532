//! The CLI's side of the product vocabulary ([`super::ProductParams`] derives its flags):
//! how a flag's text becomes a value. A refused value is a [`FlagError`], which the CLI
//! reports as its own error (exit status 1, naming the flag), as it always has.

use crate::contract::Region;
use crate::products::ProductKind;

/// A flag value that cannot be parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum FlagError {
    /// Not `N` comma-separated numbers (`got` is the flag's text).
    List { n: usize, got: String },
    /// A message complete in itself.
    Message(String),
}

impl FlagError {
    /// The message for `flag` (`--center`).
    pub fn say(&self, flag: &str) -> String {
        match self {
            FlagError::List { n, got } => {
                format!("{flag} expects {n} comma-separated numbers, got '{got}'")
            }
            FlagError::Message(m) => m.clone(),
        }
    }
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.say("the value"))
    }
}

impl std::error::Error for FlagError {}

/// `N` comma-separated values (`R,C`; spaces around them allowed).
pub fn list<T: std::str::FromStr, const N: usize>(s: &str) -> Result<[T; N], FlagError> {
    let bad = || FlagError::List {
        n: N,
        got: s.to_string(),
    };
    let values = s
        .split(',')
        .map(|p| p.trim().parse::<T>().map_err(|_| bad()))
        .collect::<Result<Vec<T>, _>>()?;
    values.try_into().map_err(|_| bad())
}

/// A half-open region `R0,R1,C0,C1`.
pub fn region(s: &str) -> Result<Region, FlagError> {
    let [r0, r1, c0, c1] = list::<usize, 4>(s)?;
    Ok(Region { r0, r1, c0, c1 })
}

/// A product kind by its name.
pub fn kind(s: &str) -> Result<ProductKind, FlagError> {
    ProductKind::parse(s).map_err(|e| FlagError::Message(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_parse_or_say_what_they_expect() {
        assert_eq!(list::<f64, 2>("-1.5, 3"), Ok([-1.5, 3.0]));
        assert_eq!(
            region("1,4,0,2"),
            Ok(Region {
                r0: 1,
                r1: 4,
                c0: 0,
                c1: 2
            })
        );
        for bad in ["1", "1,2,3", "a,b", "", "1,-2"] {
            let e = list::<usize, 2>(bad).unwrap_err();
            assert_eq!(
                e.say("--at"),
                format!("--at expects 2 comma-separated numbers, got '{bad}'")
            );
        }
        assert!(kind("nope")
            .unwrap_err()
            .say("--kind")
            .contains("unknown product kind 'nope'"));
        assert_eq!(kind("fit-bf"), Ok(ProductKind::FitBf));
    }
}
