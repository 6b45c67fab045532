//! What `stem4d bench gpu|viewer --json PATH` writes: the figures of one run with the
//! command, machine, build and day they come from, in the shape `scripts/benchmarks_md.py
//! --update` takes to replace the matching rows of `benchmarks/*.json` (BENCHMARKS.md).

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};

/// The commit the binary was built from (`build.rs`; "unknown" outside a git checkout).
pub const BUILD_COMMIT: &str = env!("STEM4D_COMMIT");

/// One run's figures: `key` is the line's name as the bench prints it, `value` the figure
/// with its units.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub command: String,
    pub machine: String,
    pub commit: String,
    pub date: String,
    pub software_adapter: bool,
    pub figures: Vec<Figure>,
}

#[derive(Debug, Serialize)]
pub struct Figure {
    pub key: String,
    pub value: String,
}

impl BenchReport {
    /// A report for this process's command line (`stem4d` and its arguments) on `machine`.
    pub fn new(machine: String, software_adapter: bool) -> BenchReport {
        BenchReport {
            command: command_without_output(std::env::args().skip(1)),
            machine,
            commit: BUILD_COMMIT.to_string(),
            date: utc_date(std::time::SystemTime::now()),
            software_adapter,
            figures: Vec::new(),
        }
    }

    pub fn push(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.figures.push(Figure {
            key: key.into(),
            value: value.into(),
        });
    }

    /// Write the report as JSON to `path` (a new file or one this command wrote before).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::param(format!("{}: {e}", path.display())))?;
        std::fs::write(path, text + "\n").map_err(|e| Error::Io {
            file: path.display().to_string(),
            message: format!("cannot write the benchmark report: {e}"),
        })
    }
}

/// `stem4d ARGS` without `--json PATH`: the command a row records, wherever it wrote.
fn command_without_output(args: impl Iterator<Item = String>) -> String {
    let mut words = vec!["stem4d".to_string()];
    let mut args = args.peekable();
    while let Some(a) = args.next() {
        if a == "--json" {
            args.next();
        } else if !a.starts_with("--json=") {
            words.push(a);
        }
    }
    words.join(" ")
}

/// `YYYY-MM-DD` of `t` in UTC (days since the epoch to a civil date).
pub fn utc_date(t: std::time::SystemTime) -> String {
    let days = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn the_command_leaves_out_where_the_report_went() {
        let args = [
            "bench",
            "gpu",
            "--json",
            "/tmp/r.json",
            "--reps",
            "20",
            "--json=x",
        ];
        assert_eq!(
            command_without_output(args.iter().map(|s| s.to_string())),
            "stem4d bench gpu --reps 20"
        );
    }

    #[test]
    fn dates_are_civil_utc_days() {
        assert_eq!(utc_date(UNIX_EPOCH), "1970-01-01");
        // 2024-02-29 (a leap day) and 2026-12-04 at 23:59:59.
        assert_eq!(
            utc_date(UNIX_EPOCH + Duration::from_secs(19_782 * 86_400)),
            "2024-02-29"
        );
        assert_eq!(
            utc_date(UNIX_EPOCH + Duration::from_secs(20_791 * 86_400 + 86_399)),
            "2026-12-04"
        );
    }
}
