//! Human status messages on stderr, filtered by `--log-level` / `FLEXPASS_LOG` (error, warn,
//! info, debug; default info). Info lines are printed as they are, the others with their
//! level in front. JSON records never go through here.

use log::{Level, LevelFilter, Log, Metadata, Record};

pub const LEVELS: [&str; 4] = ["error", "warn", "info", "debug"];
pub const ENV: &str = "FLEXPASS_LOG";

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        match r.level() {
            Level::Info => eprintln!("{}", r.args()),
            Level::Warn => eprintln!("warning: {}", r.args()),
            l => eprintln!("{}: {}", l.as_str().to_lowercase(), r.args()),
        }
    }

    fn flush(&self) {}
}

/// The level from the command line, else from `FLEXPASS_LOG` (`env`), else info.
pub fn level(cli: Option<&str>, env: Option<&str>) -> Result<LevelFilter, String> {
    let (text, from) = match (cli, env) {
        (Some(c), _) => (c, "--log-level"),
        (None, Some(e)) if !e.trim().is_empty() => (e.trim(), ENV),
        _ => return Ok(LevelFilter::Info),
    };
    Ok(match text.to_ascii_lowercase().as_str() {
        "error" => LevelFilter::Error,
        "warn" | "warning" => LevelFilter::Warn,
        "info" => LevelFilter::Info,
        "debug" => LevelFilter::Debug,
        _ => {
            return Err(format!(
                "{from}: unknown log level '{text}' ({})",
                LEVELS.join(", ")
            ))
        }
    })
}

pub fn init(level: LevelFilter) {
    static LOGGER: Stderr = Stderr;
    // Only fails if a logger is already installed (tests).
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_beats_environment() {
        assert_eq!(level(None, None), Ok(LevelFilter::Info));
        assert_eq!(level(None, Some("DEBUG")), Ok(LevelFilter::Debug));
        assert_eq!(level(None, Some("")), Ok(LevelFilter::Info));
        assert_eq!(level(Some("warn"), Some("debug")), Ok(LevelFilter::Warn));
        let e = level(None, Some("loud")).unwrap_err();
        assert_eq!(
            e,
            "FLEXPASS_LOG: unknown log level 'loud' (error, warn, info, debug)"
        );
    }
}
