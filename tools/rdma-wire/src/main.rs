//! rdma-wire [--summary] [--strict] [--inline BYTES] FILE.pcap
//!
//! Exit status: 0 when nothing was flagged, 1 when a message broke a rule
//! (or could not be checked), 2 when the file could not be read.

use std::process::ExitCode;

use rdma_wire::{analyze, Options};

const USAGE: &str = "usage: rdma-wire [--summary] [--strict] [--inline BYTES] FILE.pcap|-";

fn main() -> ExitCode {
    let mut opts = Options::default();
    let mut summary = false;
    let mut path = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--summary" => summary = true,
            "--strict" => opts.strict = true,
            "--inline" => match args.next().and_then(|v| v.parse().ok()) {
                Some(n) => opts.inline = Some(n),
                None => {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if path.is_none() => path = Some(a),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(path) = path else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let file = if path == "-" {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut v).map(|_| v)
    } else {
        std::fs::read(&path)
    };
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rdma-wire: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let a = match analyze(&file, opts) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rdma-wire: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    for l in &a.lines {
        println!("{l}");
    }
    if summary {
        println!("{}", a.summary.line());
    }
    if a.summary.flagged > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
