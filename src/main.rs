//! The `vlm-eval` binary: parses flags, sets up logging and maps errors to exit codes.

use vlm_eval::cli;

/// Output into a closed pipe (`vlm-eval score runs | head -1`) ends the process as it ends `cat`:
/// killed by SIGPIPE, quietly. Rust ignores SIGPIPE so that a socket write fails with an error
/// instead (sockets and child pipes keep that behaviour); `print!` then panics on the broken
/// pipe, and this hook turns that one panic back into the signal. Any other failed write of the
/// output (a full disk) is one error line and exit code 1, not a panic.
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            #[cfg(unix)]
            // SAFETY: restores SIGPIPE's default action and raises it on this process; no memory
            // is touched.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::raise(libc::SIGPIPE);
            }
            std::process::exit(141);
        }
        if let Some(reason) = message.strip_prefix("failed printing to ") {
            // Any other failed write of the output (a full disk, `> /dev/full`): one line, exit 1.
            eprintln!("error: cannot write the output to {reason}; free space or send the output elsewhere");
            std::process::exit(1);
        }
        default(info);
    }));
}

fn main() {
    quiet_broken_pipe();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("VLM_EVAL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
    let args = cli::usage::parse_or_exit(cli::with_default_command(std::env::args_os().collect()));
    match cli::run(args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.code);
        }
    }
}
