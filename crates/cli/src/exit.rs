//! Exit codes and error reports.
//!
//! Errors are printed for people: validation problems list every finding as
//! `field: rule`, auth and connection problems say what to check, conflicts name the operation
//! holding the target. The exit code tells scripts and agents what kind of failure it was
//! (see `instantstart --help`).

use instantstart_client::Error as ClientError;

/// Process exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    /// The operation did not succeed, or an unclassified error.
    Failed = 1,
    /// Usage or validation error (clap errors, HTTP 400/404/422).
    Usage = 2,
    /// Authentication or connection error (HTTP 401/403, unreachable).
    Auth = 3,
    /// HTTP 409.
    Conflict = 4,
    /// Ctrl-C while waiting.
    Interrupted = 130,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

/// A usage error found by the CLI itself (exit 2).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Shorthand for a usage error.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Usage(message.into()))
}

/// Waiting was interrupted (exit 130).
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// The exit code for a client error.
pub fn classify(e: &ClientError) -> Exit {
    match e {
        ClientError::Api { status, .. } => match status {
            400 | 404 | 422 => Exit::Usage,
            401 | 403 => Exit::Auth,
            409 => Exit::Conflict,
            _ => Exit::Failed,
        },
        ClientError::Connection { .. } => Exit::Auth,
        ClientError::InvalidUrl { .. } => Exit::Usage,
        ClientError::Decode { .. } | ClientError::Config { .. } => Exit::Failed,
    }
}

/// Whether `e` is a write to a closed pipe.
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// Prints `e` to stderr and returns its exit code.
pub fn report(e: &anyhow::Error) -> Exit {
    if e.downcast_ref::<Interrupted>().is_some() {
        return Exit::Interrupted;
    }
    if broken_pipe(e) {
        // The reader went away (`… | head -1`): nothing more to say, and nobody to say it to.
        return Exit::Ok;
    }
    if let Some(u) = e.downcast_ref::<Usage>() {
        eprintln!("error: {u}");
        return Exit::Usage;
    }
    let Some(client_err) = e.chain().find_map(|c| c.downcast_ref::<ClientError>()) else {
        eprintln!("error: {e:#}");
        return Exit::Failed;
    };
    let code = classify(client_err);
    let context: Vec<String> =
        e.chain().take_while(|c| c.downcast_ref::<ClientError>().is_none()).map(ToString::to_string).collect();
    let prefix = if context.is_empty() { String::new() } else { format!("{}: ", context.join(": ")) };
    match client_err {
        ClientError::Api { status, problem } => {
            if problem.findings.is_empty() {
                eprintln!("error: {prefix}{problem} (HTTP {status})");
            } else {
                eprintln!("error: {prefix}{} (HTTP {status}):", problem.title);
                for f in &problem.findings {
                    if f.field.is_empty() {
                        eprintln!("  {}", f.rule);
                    } else {
                        eprintln!("  {}: {}", f.field, f.rule);
                    }
                }
            }
            match status {
                401 => eprintln!(
                    "hint: run `instantstart login` or set INSTANTSTART_TOKEN (the server prints its token at first start and keeps it in <data-dir>/token)"
                ),
                403 => eprintln!("hint: this token's scope does not allow the request; use a token with scope operate"),
                409 => {
                    if let Some(op) = &problem.operation_id {
                        eprintln!("hint: see `instantstart operation get {op}` (wait for it, or cancel it)");
                    }
                }
                _ => {}
            }
        }
        ClientError::Connection { .. } => {
            eprintln!("error: {prefix}{client_err}");
            eprintln!("hint: is the server running? Point the CLI at it with --url or INSTANTSTART_URL");
        }
        other => eprintln!("error: {prefix}{other}"),
    }
    code
}
