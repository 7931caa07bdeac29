//! `ccbench middlebox` with real TLS endpoints: OpenSSL's `s_server` and `s_client` (TLS
//! 1.2, ECDHE-RSA-AES256-GCM-SHA384) through the relay, the client's key log followed by
//! `ccbench middlebox share`. Skipped, saying so, where `openssl` is not installed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn ccbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ccbench"))
}

fn have_openssl() -> bool {
    let ok = Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        // Under CI (`CI` set, as `.ci/run` installs it) a missing openssl fails the test.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set and `openssl` is not installed: this test must run under CI"
        );
        eprintln!("skipped: `openssl` is not installed");
    }
    ok
}

/// A free port on loopback (bound, then released for the process that takes it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An RSA-2048 server certificate for `localhost` under a generated root, as PEM files.
fn server_cert(dir: &Path) -> (PathBuf, PathBuf) {
    use rcgen::{CertificateParams, KeyPair, RsaKeySize};
    let key = KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, RsaKeySize::_2048).unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (c, k) = (dir.join("server.pem"), dir.join("server.key"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

/// `ccbench middlebox` on free ports relaying to `upstream`, with its platform keys in
/// `keys`, its results in `out` and its stderr piped (it names the ports it bound).
fn relay_command(upstream: &str, keys: &Path, out: &Path) -> Command {
    let mut c = ccbench();
    c.args([
        "middlebox",
        "--listen",
        "127.0.0.1:0",
        "--share-listen",
        "127.0.0.1:0",
    ])
    .args(["--upstream", upstream])
    .arg("--platform-key-dir")
    .arg(keys)
    .arg("--out")
    .arg(out)
    .stderr(Stdio::piped());
    c
}

/// Kills a child on drop (a failed assertion must not leave servers behind).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn interrupt(child: &Child) {
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Waits for a child to exit, at most `limit`.
fn wait_for(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t.elapsed() < limit, "the process did not exit in {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads a child's stderr on a thread: each line goes to the channel.
fn lines_of(stderr: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  | {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `what`, returning it.
fn line_with(rx: &mpsc::Receiver<String>, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(_) => {}
            Err(e) => panic!("no line with {what:?}: {e}"),
        }
    }
}

/// The address after `label` in a line such as "relaying 127.0.0.1:1234 -> ...".
fn addr_after(line: &str, label: &str) -> String {
    let rest = &line[line.find(label).unwrap() + label.len()..];
    rest.split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches([';', ','])
        .to_owned()
}

/// The known data, with `n` of each pattern planted in text that cannot contain them.
fn payload(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        out.extend_from_slice(format!("line {i:05} lorem ipsum dolor sit amet ").as_bytes());
        out.extend_from_slice(b"NEEDLE-ALPHA ");
        out.extend_from_slice(&[b'.'; 700]);
        out.extend_from_slice(b" needle-beta\n");
    }
    out
}

/// The records of the results file in the output folder `out`.
fn results(out: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn table<'a>(records: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    records
        .iter()
        .find(|r| r["kind"] == "table" && r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} table"))
}

fn summary_value(records: &[serde_json::Value], what: &str) -> serde_json::Value {
    let t = table(records, "live_summary");
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == what)
        .unwrap_or_else(|| panic!("no summary row {what}"))[1]
        .clone()
}

/// The records the relay wrote of the session itself (`mode = live`): at least one.
fn live_records(records: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    let live: Vec<_> = records
        .iter()
        .filter(|r| r["params"]["mode"] == "live")
        .collect();
    assert!(!live.is_empty());
    live
}

#[test]
fn openssl_client_and_server_through_the_middlebox_are_inspected_and_unchanged() {
    if !have_openssl() {
        return;
    }
    let records = openssl_session(&[]);
    let live = live_records(&records);
    for r in live {
        assert_eq!(r["params"]["selected_by"], "options", "{r}");
        assert_eq!(r["params"]["batched"], false, "{r}");
        assert_eq!(r["params"]["switchless_ecalls"], "none", "{r}");
        assert!(r["params"]["batch_max_records"].is_null(), "{r}");
    }
}

/// `--batch`: records are inspected off the forwarding path by the inspection thread, and
/// the session is relayed unchanged and inspected whole as without (the helper checks
/// every pattern counted and nothing uninspected).
#[test]
fn a_batched_middlebox_relays_and_inspects_an_openssl_session() {
    if !have_openssl() {
        return;
    }
    let records = openssl_session(&["--batch"]);
    let live = live_records(&records);
    for r in live {
        assert_eq!(r["params"]["selected_by"], "options", "{r}");
        assert_eq!(r["params"]["batched"], true, "{r}");
        // The batcher's limits, as the scenario's records name them; no switchless slot.
        assert_eq!(r["params"]["batch_max_records"], 512, "{r}");
        assert_eq!(r["params"]["batch_max_bytes"], 1 << 20, "{r}");
        assert!(r["params"]["switchless_slot_bytes"].is_null(), "{r}");
    }
}

/// `--switchless advisor`: the advisor profiles the enclave before the relay serves, its
/// choice is what the relay runs with, and the session is relayed and inspected as without.
#[test]
fn the_advisors_selection_relays_an_openssl_session() {
    if !have_openssl() {
        return;
    }
    let records = openssl_session(&["--switchless", "advisor"]);
    let live = live_records(&records);
    for r in &live {
        assert_eq!(r["params"]["selected_by"], "advisor", "{r}");
    }
    // The start-up profile's table says what the advisor chose, and the live records name
    // that selection.
    let profile = records
        .iter()
        .find(|r| r["kind"] == "table" && r["params"]["advised_switchless"].is_string())
        .expect("the start-up profile's table");
    let chosen = profile["params"]["advised_switchless"].as_str().unwrap();
    let batched = profile["params"]["advised_batching"].as_bool().unwrap();
    assert_eq!(live[0]["params"]["batched"], batched, "{profile}");
    let ecalls = live[0]["params"]["switchless_ecalls"].as_str().unwrap();
    assert_eq!(ecalls, chosen, "{profile}");
}

/// Ctrl-C while `--switchless advisor` profiles: exit 130, no relay, nothing written.
#[test]
fn ctrl_c_while_the_advisor_profiles_relays_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut mb = Reaped(
        relay_command("127.0.0.1:9", &dir.path().join("platform"), &out)
            .args(["--switchless", "advisor"])
            .spawn()
            .unwrap(),
    );
    let lines = lines_of(mb.0.stderr.take().unwrap());
    line_with(&lines, "profiling the enclave's ecalls");
    interrupt(&mb.0);
    let status = wait_for(&mut mb.0, Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{status}");
    let said: Vec<String> = lines.try_iter().collect();
    assert!(
        !said.iter().any(|l| l.contains("relaying")),
        "it relayed: {said:?}"
    );
    assert!(!out.join("results.jsonl").exists());
}

/// A client whose upstream refuses: its connection is closed, counted in the records, and
/// the relay says so on the terminal when it stops (no `openssl` needed).
#[test]
fn an_unreachable_upstream_is_counted_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let nowhere = format!("127.0.0.1:{}", free_port());
    let mut mb = Reaped(
        relay_command(&nowhere, &dir.path().join("platform"), &out)
            .spawn()
            .unwrap(),
    );
    let lines = lines_of(mb.0.stderr.take().unwrap());
    let relaying = line_with(&lines, "relaying");
    let listen = addr_after(&relaying, "relaying ");
    let mut client = std::net::TcpStream::connect(&listen).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The relay closes the client's connection once the upstream has refused.
    let mut rest = Vec::new();
    assert_eq!(client.read_to_end(&mut rest).unwrap_or(0), 0);
    interrupt(&mb.0);
    let said = line_with(&lines, "could not reach the upstream");
    assert!(
        said.contains(&nowhere) && said.contains("1 connection"),
        "{said}"
    );
    // Ctrl-C is how a relay is stopped: a normal exit.
    let status = wait_for(&mut mb.0, Duration::from_secs(60));
    assert!(status.success(), "{status}");
    let records = results(&out);
    assert_eq!(summary_value(&records, "upstream failures"), 1);
}

/// One `openssl s_client` session through `ccbench middlebox` (with `extra` options) to
/// `openssl s_server`, its key log followed by a share agent: checks the bytes, the
/// inspection and the records, and returns the records.
fn openssl_session(extra: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("platform");
    let (cert, key) = server_cert(dir.path());
    let rules = dir.path().join("rules.txt");
    std::fs::write(
        &rules,
        "# planted\nNEEDLE-ALPHA\nhex:6e6565646c652d62657461\n",
    )
    .unwrap();
    let keylog = dir.path().join("keys.log");
    let out = dir.path().join("out");

    // The server: prints what it receives; its stdin stays open (an empty pipe).
    let server_port = free_port();
    let mut server = Reaped(
        Command::new("openssl")
            .args([
                "s_server",
                "-tls1_2",
                "-cipher",
                "ECDHE-RSA-AES256-GCM-SHA384",
            ])
            .args(["-quiet", "-naccept", "1", "-accept"])
            .arg(format!("127.0.0.1:{server_port}"))
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut server_out = server.0.stdout.take().unwrap();
    let received = std::thread::spawn(move || {
        let mut got = Vec::new();
        let _ = server_out.read_to_end(&mut got);
        got
    });

    let mut mb = Reaped(
        relay_command(&format!("127.0.0.1:{server_port}"), &keys, &out)
            .args(["--backend", "sandbox", "--status-every", "1"])
            .args(extra)
            .arg("--rules")
            .arg(&rules)
            .spawn()
            .unwrap(),
    );
    let mb_lines = lines_of(mb.0.stderr.take().unwrap());
    let ready = line_with(&mb_lines, "relaying");
    let relay = addr_after(&ready, "relaying ");
    let shares = addr_after(&ready, "key shares on ");

    // A share agent whose platform is another: it refuses the quote and sends nothing.
    let other = ccbench()
        .args(["middlebox", "share", "--to", &shares, "--duration", "5"])
        .arg("--keylog")
        .arg(&keylog)
        .arg("--platform-key-dir")
        .arg(dir.path().join("another-platform"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success(), "{said}");
    assert!(
        said.contains("no share was sent") || said.contains("trust"),
        "{said}"
    );

    // The agent: follows the client's key log.
    let mut agent = Reaped(
        ccbench()
            .args(["middlebox", "share", "--to", &shares])
            .arg("--keylog")
            .arg(&keylog)
            .arg("--platform-key-dir")
            .arg(&keys)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let agent_lines = lines_of(agent.0.stderr.take().unwrap());
    line_with(&agent_lines, "following");

    // The client: sends the payload, then closes at the end of its input.
    let data = payload(40);
    let mut client = Command::new("openssl")
        .args([
            "s_client",
            "-tls1_2",
            "-cipher",
            "ECDHE-RSA-AES256-GCM-SHA384",
        ])
        .args([
            "-nocommands",
            "-servername",
            "localhost",
            "-connect",
            &relay,
        ])
        .arg("-keylogfile")
        .arg(&keylog)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    client.stdin.take().unwrap().write_all(&data).unwrap();
    let client_status = wait_for(&mut client, Duration::from_secs(60));
    assert!(client_status.success(), "s_client: {client_status}");
    let server_status = wait_for(&mut server.0, Duration::from_secs(60));
    assert!(server_status.success(), "s_server: {server_status}");
    let got = received.join().unwrap();
    assert!(
        got == data,
        "the server received {} bytes, not the {} sent",
        got.len(),
        data.len()
    );

    // The flow's share came from the key log; once the flow has closed, stop both.
    line_with(&mb_lines, "flows 1 (0 open)");
    interrupt(&agent.0);
    let agent_status = wait_for(&mut agent.0, Duration::from_secs(30));
    assert!(agent_status.success(), "agent: {agent_status}");
    let sent = line_with(&agent_lines, "shares sent");
    assert!(sent.contains("1 shares sent (1 delivered"), "{sent}");
    interrupt(&mb.0);
    let mb_status = wait_for(&mut mb.0, Duration::from_secs(60));
    assert!(mb_status.success(), "middlebox: {mb_status}");

    let records = results(&out);
    let flows = table(&records, "live_flows");
    let rows = flows["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{flows}");
    let col = |name: &str| {
        let i = flows["columns"]
            .as_array()
            .unwrap()
            .iter()
            .position(|c| c == name)
            .unwrap();
        rows[0][i].clone()
    };
    assert_eq!(col("matches"), 80, "40 of each pattern: {flows}");
    assert_eq!(col("uninspected"), 0, "{flows}");
    assert_eq!(col("problems"), "", "{flows}");
    assert_eq!(
        col("plaintext bytes").as_u64().unwrap() as usize,
        data.len(),
        "{flows}"
    );
    assert!(col("records decrypted").as_u64().unwrap() > 0);
    assert_eq!(
        summary_value(&records, "shares delivered to the enclave"),
        1
    );
    assert_eq!(summary_value(&records, "share agents connected"), 2);
    assert_eq!(summary_value(&records, "shares received"), 1);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "table" && r["name"] == "advice"),
        "the advisor's verdicts"
    );
    assert!(out.join("report.html").exists() && out.join("report.md").exists());
    // No secret in the results: the key log's master secret appears nowhere.
    let log = std::fs::read_to_string(&keylog).unwrap();
    let master = log
        .lines()
        .find(|l| l.starts_with("CLIENT_RANDOM"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap()
        .to_owned();
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert!(!text.to_lowercase().contains(&master.to_lowercase()));
    records
}
