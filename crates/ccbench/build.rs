//! Records the build's identity (git commit, compiler, profile) for the environment record.

use std::path::Path;
use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    // Re-run when the commit or the tree changes: HEAD, the branch it points to and the
    // packed refs (a commit moves the branch, not HEAD), the index, and the sources (an
    // edit makes the build dirty without touching git). `--git-path` finds each file in a
    // linked worktree too, where `.git` is a file.
    let mut watched: Vec<String> = ["HEAD", "index", "packed-refs"]
        .iter()
        .filter_map(|f| output("git", &["rev-parse", "--git-path", f]))
        .collect();
    if let Some(branch) = output("git", &["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(output("git", &["rev-parse", "--git-path", &branch]));
    }
    watched.extend(["../../crates", "../../examples", "../../Cargo.toml"].map(String::from));
    for path in watched {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    let commit = output("git", &["rev-parse", "--short=12", "HEAD"])
        .map(|c| {
            let dirty = output("git", &["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{c}-dirty") } else { c }
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc = output(&rustc, &["--version"]).unwrap_or_else(|| "unknown".to_owned());
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=CCBENCH_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=CCBENCH_RUSTC={rustc}");
    println!("cargo:rustc-env=CCBENCH_PROFILE={profile}");
}
