//! A throwaway PostgreSQL server for tests (this crate's and the cli's, through the
//! `test-server` feature): a cluster from Debian's `postgresql` package (initdb and pg_ctl
//! under `/usr/lib/postgresql/*/bin`) in a temporary folder, listening on a free port of
//! 127.0.0.1 and a socket in that folder, trust authentication, stopped when dropped.
//! PostgreSQL refuses to run as root: as root the cluster runs as the `postgres` system user.
//!
//! Without the binaries [`Server::start`] says so loudly and returns None (the test passes
//! without a server), except under CI (`CI` set), where their absence fails the test.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output};

/// A PostgreSQL cluster of this test's own; stopped (immediately) when dropped.
pub struct Server {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
}

/// The newest installed PostgreSQL's binaries folder, holding initdb and pg_ctl.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A port of 127.0.0.1 that nothing listens on (now).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

impl Server {
    /// Starts a cluster, or returns None (after a banner saying why) when the PostgreSQL
    /// binaries are absent and `CI` is not set. Under CI their absence fails the test.
    pub fn start(test: &str) -> Option<Server> {
        let Some(bin) = bin_dir() else {
            let why = "the PostgreSQL binaries (initdb, pg_ctl under /usr/lib/postgresql/*/bin) \
                       are absent; install Debian's postgresql package";
            if std::env::var_os("CI").is_some() {
                panic!("{test}: CI is set and {why}: this test must run under CI");
            }
            eprintln!(
                "\n==================== SKIPPED: {test} ====================\n\
                 {why} (apt-get install -y postgresql) to run this test against a real server.\n\
                 ========================================================================\n"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("ccbench-pg-")
            .tempdir()
            .expect("a temporary folder");
        let as_postgres = is_root();
        let mut server = Server {
            bin,
            dir,
            port: 0,
            as_postgres,
        };
        if as_postgres {
            let o = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(server.dir.path())
                .output()
                .expect("chown runs");
            assert!(
                o.status.success(),
                "{test}: as root the cluster runs as the postgres user, which must exist: {}",
                text(&o)
            );
        }
        let data = server.data();
        let o = server
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .output()
            .expect("initdb runs");
        assert!(o.status.success(), "{test}: initdb failed: {}", text(&o));
        // A port free now may be taken before the server binds it (other tests, other
        // agents): try a few.
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let o = server
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(server.dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o"])
                .arg(format!(
                    "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=off \
                     -c max_connections=40",
                    server.dir.path().display()
                ))
                .arg("start")
                .output()
                .expect("pg_ctl runs");
            if o.status.success() {
                server.port = port;
                eprintln!(
                    "{test}: PostgreSQL from {} on 127.0.0.1:{port}",
                    server.bin.display()
                );
                return Some(server);
            }
            last = format!(
                "{}\n{}",
                text(&o),
                std::fs::read_to_string(server.dir.path().join("server.log")).unwrap_or_default()
            );
        }
        panic!("{test}: the PostgreSQL server did not start: {last}");
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// One of the binaries, as the postgres user when running as root.
    fn command(&self, name: &str) -> Command {
        let exe = self.bin.join(name);
        let mut c = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        c.current_dir(self.dir.path());
        c
    }

    /// A new empty database on this server, and its URL.
    pub fn database(&self, name: &str) -> String {
        let mut admin = ::postgres::Client::connect(&self.url("postgres"), ::postgres::NoTls)
            .expect("the test server answers");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("CREATE DATABASE");
        self.url(name)
    }

    /// The URL of database `db` on this server, as the postgres user.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.port == 0 {
            return;
        }
        let data = self.data();
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}
