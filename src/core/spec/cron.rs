//! The cron syntax of scheduled windows, checked where the settings are validated and used
//! where the windows are evaluated (policy::schedule).

use std::str::FromStr;

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// Parses a five-field cron expression (minute hour day-of-month month day-of-week).
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    let fields = expr.split_whitespace().count();
    if fields != 5 && !expr.trim_start().starts_with('@') {
        return Err(format!(
            "{expr:?} has {fields} fields; five are expected (minute hour day-of-month month \
             day-of-week)"
        ));
    }
    let _ = Cron::from_str; // the default parser accepts seconds and years too; ours does not
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| format!("{expr:?} is not a valid cron expression: {e}"))
}
