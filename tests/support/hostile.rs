//! What the hostile-input suites (`tests/it/hostile_*.rs`) share: a local endpoint that counts
//! the connections made to it (a refused command must send no request), and the refusal check
//! (the exit code, exactly one line on stderr, and a working folder left empty: no run folder,
//! no `results/`, no file), run for many cases at once so that a sweep stays fast.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An OpenAI-compatible URL whose server counts every connection and answers each with a 500:
/// a command that reached it sent a request.
pub struct CountingServer {
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    count: Arc<AtomicUsize>,
}

impl CountingServer {
    /// Listen on a free port of 127.0.0.1 (a thread accepts for the rest of the test process).
    pub fn start() -> CountingServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let seen = count.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                seen.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(
                    b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
            }
        });
        CountingServer { url, count }
    }

    /// Connections made so far.
    pub fn requests(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// One hostile case: the binary's arguments and extra environment, and what it must end with.
#[derive(Clone, Debug)]
pub struct Case {
    /// What the table calls it (printed when it fails).
    pub name: String,
    /// The arguments after the binary.
    pub args: Vec<String>,
    /// Variables set for it (besides `support::command`'s).
    pub env: Vec<(String, String)>,
    /// The exit code it must end with.
    pub code: i32,
    /// Text the one stderr line must hold (case-sensitive).
    pub needle: String,
}

impl Case {
    /// A case expecting exit 2 whose line holds `needle`.
    pub fn refused(name: impl Into<String>, args: &[&str], needle: &str) -> Case {
        Case {
            name: name.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            code: 2,
            needle: needle.to_string(),
        }
    }

    /// The same case with `k=v` in its environment.
    pub fn with_env(mut self, k: &str, v: &str) -> Case {
        self.env.push((k.to_string(), v.to_string()));
        self
    }
}

/// Everything inside `dir` (relative paths), for the message when it should be empty.
pub fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap_or(&p).to_path_buf());
            if p.is_dir() {
                todo.push(p);
            }
        }
    }
    out
}

/// Run one case in its own empty working folder `cwd` with its own counting endpoint
/// (`OPENAI_BASE_URL` and an `OPENAI_API_KEY` set, so that a command that went on would send
/// its request there); returns what failed, if anything.
pub fn check_case(case: &Case, cwd: &Path) -> Option<String> {
    let server = CountingServer::start();
    let _ = std::fs::remove_dir_all(cwd);
    std::fs::create_dir_all(cwd).unwrap();
    let mut cmd = super::command();
    cmd.current_dir(cwd)
        .args(&case.args)
        .env("OPENAI_BASE_URL", &server.url)
        .env("OPENAI_API_KEY", "sk-hostile-test");
    for (k, v) in &case.env {
        cmd.env(k, v);
    }
    let o: Output = cmd.output().expect("run vlm-eval");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut why = Vec::new();
    if o.status.code() != Some(case.code) {
        why.push(format!("exit {:?}, not {}", o.status.code(), case.code));
    }
    if lines.len() != 1 {
        why.push(format!("{} stderr lines, not 1", lines.len()));
    }
    if !stderr.contains(&case.needle) {
        why.push(format!("stderr lacks {:?}", case.needle));
    }
    let left = listing(cwd);
    if !left.is_empty() {
        why.push(format!("left {left:?} in its working folder"));
    }
    if server.requests() > 0 {
        why.push(format!("sent {} request(s)", server.requests()));
    }
    (!why.is_empty()).then(|| {
        format!(
            "{} ({:?}): {}\n    stderr: {}",
            case.name,
            case.args,
            why.join("; "),
            stderr.trim()
        )
    })
}

/// Run every case, `parallel` at a time, each in its own working folder under `root`; panics
/// listing every case that failed (not only the first).
pub fn expect_all(cases: &[Case], root: &Path, parallel: usize) {
    let next = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..parallel.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                if let Some(f) = check_case(case, &root.join(format!("case{i}"))) {
                    failures.lock().unwrap().push(f);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
