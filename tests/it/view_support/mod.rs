//! Shared by the `leaderboard`, `no_clobber` and `view` tests: mock runs, a raw HTTP GET (so requested paths
//! reach the server exactly as written), and a started `vlm-eval view`. Built on
//! `tests/support` (the binary, scratch folders): a test binary using it also declares
//! `mod support;`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::{text, vlm_eval};

/// A real run folder from `--model NAME` (mock, random: offline and deterministic).
pub fn model_run(
    dir: &Path,
    model: &str,
    name: &str,
    seeds: &str,
    steps: &str,
    extra: &[&str],
) -> PathBuf {
    let mut args = vec![
        "--model",
        model,
        "--seeds",
        seeds,
        "--steps",
        steps,
        "--out",
        dir.to_str().unwrap(),
        "--run-name",
        name,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let o = vlm_eval(&args);
    assert!(o.status.success(), "{}", text(&o).1);
    dir.join(name)
}

/// One HTTP/1.1 GET with the path sent byte for byte; (status, headers + body as text).
pub fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the view server");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A running `vlm-eval view`; killed when dropped.
pub struct View {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl View {
    /// Start `vlm-eval view DIR --port 0` and read the URL it prints.
    pub fn start(dir: &Path) -> View {
        let mut child = crate::support::command()
            .args(["view", dir.to_str().unwrap(), "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start vlm-eval view");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("vlm-eval view: ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        View { child, addr }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under a folder with its size and modification time, sorted (to show nothing was
/// written).
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            if m.is_dir() {
                stack.push(e.path());
            }
            out.push((e.path(), m.len(), m.modified().unwrap()));
        }
    }
    out.sort();
    out
}
