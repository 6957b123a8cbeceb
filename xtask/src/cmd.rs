//! Running external programs with errors that say which command failed and why.
use anyhow::{Context as _, Result, bail};
use std::process::{Command, Output};

/// Renders a command as a shell-like line for messages.
pub fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `cmd` with inherited stdio and fails unless it exits 0.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot start `{}`", describe(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(cmd));
    }
    Ok(())
}

/// Runs `cmd`, captures its output and fails (showing stderr) unless it exits 0.
pub fn output(cmd: &mut Command) -> Result<String> {
    let out = try_output(cmd)?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8", describe(cmd)))
}

/// Runs `cmd` and returns its raw output whatever its exit status.
pub fn try_output(cmd: &mut Command) -> Result<Output> {
    cmd.output().with_context(|| format!("cannot start `{}`", describe(cmd)))
}

/// Quotes `s` for a POSIX shell script.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_survives_single_quotes() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
