//! The checks' verdicts over a set of records: how many passed, warned and failed, which did
//! not pass and why, and whether the run fails.
//!
//! A check has a subject ([`CheckSubject`]): this run's own data, or figures someone published
//! (a paper's table fed to the same check), or the machine's conditions while it ran (the
//! hypervisor's steal). Only checks of this run count towards the run's verdict; a check of
//! published figures is a *finding about the publication*, listed apart, and a check of the
//! machine qualifies the timings; neither is ever a failure of the run, whatever its verdict.

use measure::Record;
use measure::record::{Body, CheckSubject, Verdict};

use crate::doc::params_text;

/// One check, as a summary lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckItem {
    /// The scenario that ran the check.
    pub scenario: String,
    /// The record's backend.
    pub backend: String,
    /// The check's name.
    pub name: String,
    /// The record's parameters as `k=v, k=v` (empty for none).
    pub params: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The numbers behind the verdict.
    pub message: String,
}

impl CheckItem {
    /// `scenario/backend: name (params)`.
    pub fn what(&self) -> String {
        if self.params.is_empty() {
            format!("{}/{}: {}", self.scenario, self.backend, self.name)
        } else {
            format!(
                "{}/{}: {} ({})",
                self.scenario, self.backend, self.name, self.params
            )
        }
    }
}

/// Counts of verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Checks that held.
    pub pass: usize,
    /// Checks that warned.
    pub warn: usize,
    /// Checks that failed.
    pub fail: usize,
}

impl Counts {
    fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Pass => self.pass += 1,
            Verdict::Warn => self.warn += 1,
            Verdict::Fail => self.fail += 1,
        }
    }

    /// `3 pass, 1 warn, 0 fail`.
    pub fn text(&self) -> String {
        format!("{} pass, {} warn, {} fail", self.pass, self.warn, self.fail)
    }
}

/// The verdicts of every check in a set of records.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdicts {
    /// Checks of this run's own data, by verdict.
    pub run: Counts,
    /// Checks of this run's data that did not pass, in record order.
    pub not_passed: Vec<CheckItem>,
    /// Checks of published figures, by verdict.
    pub published: Counts,
    /// Every check of published figures (findings about the publication), in record order.
    pub findings: Vec<CheckItem>,
    /// Checks of the machine's conditions, by verdict.
    pub machine: Counts,
    /// Checks of the machine's conditions that did not pass, in record order.
    pub conditions: Vec<CheckItem>,
}

impl Verdicts {
    /// The verdicts of the checks in `records`.
    pub fn of(records: &[Record]) -> Verdicts {
        Verdicts::of_matching(records, |_| true)
    }

    /// The verdicts of the checks in `records` of one scenario.
    pub fn of_scenario(records: &[Record], scenario: &str) -> Verdicts {
        Verdicts::of_matching(records, |r| r.scenario == scenario)
    }

    fn of_matching(records: &[Record], keep: impl Fn(&Record) -> bool) -> Verdicts {
        let mut v = Verdicts::default();
        for r in records.iter().filter(|r| keep(r)) {
            let Body::Check(c) = &r.body else {
                continue;
            };
            let item = CheckItem {
                scenario: r.scenario.clone(),
                backend: r.backend.clone(),
                name: c.name.clone(),
                params: params_text(&r.params),
                verdict: c.verdict,
                message: c.message.clone(),
            };
            match c.subject {
                CheckSubject::Run => {
                    v.run.add(c.verdict);
                    if c.verdict != Verdict::Pass {
                        v.not_passed.push(item);
                    }
                }
                CheckSubject::Published => {
                    v.published.add(c.verdict);
                    v.findings.push(item);
                }
                CheckSubject::Machine => {
                    v.machine.add(c.verdict);
                    if c.verdict != Verdict::Pass {
                        v.conditions.push(item);
                    }
                }
            }
        }
        v
    }

    /// Whether the run fails: a check of its own data failed, or (with `strict`) warned.
    /// Checks of published figures or of the machine never fail a run.
    pub fn fails_run(&self, strict: bool) -> bool {
        self.run.fail > 0 || (strict && self.run.warn > 0)
    }

    /// The summary printed at the end of a run: the counts, each check of this run that did
    /// not pass with its message, the machine's conditions that qualify the timings, then the
    /// findings about published figures, labelled as such.
    pub fn render_terminal(&self) -> String {
        let mut out = format!("Checks of this run's data: {}\n", self.run.text());
        list(&mut out, &self.not_passed);
        if !self.conditions.is_empty() {
            out.push_str(&format!(
                "Conditions of the machine (not failures of this run): {}\n",
                self.machine.text()
            ));
            list(&mut out, &self.conditions);
        }
        if !self.findings.is_empty() {
            out.push_str(&format!(
                "Findings about the published figures (not failures of this run): {}\n",
                self.published.text()
            ));
            list(&mut out, &self.findings);
        }
        out
    }
}

/// One line per check: `  VERDICT  what: message`.
fn list(out: &mut String, items: &[CheckItem]) {
    for i in items {
        out.push_str(&format!(
            "  {}  {}: {}\n",
            verdict_text(i.verdict),
            i.what(),
            one_line(&i.message)
        ));
    }
}

/// `PASS`, `WARN`, `FAIL`.
pub(crate) fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "PASS",
        Verdict::Warn => "WARN",
        Verdict::Fail => "FAIL",
    }
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use measure::params;
    use measure::record::Check;

    fn check(scenario: &str, c: Check) -> Record {
        Record::new(scenario, "native", params! { "size" => 1 }, Body::Check(c))
    }

    #[test]
    fn counts_and_lists_checks_by_subject() {
        let records = vec![
            check("a", Check::run("ok", Verdict::Pass, "fine")),
            check("a", Check::run("slow", Verdict::Warn, "a bit\nslow")),
            check("b", Check::published("table", Verdict::Fail, "4587 tx/s")),
            check("b", Check::published("other", Verdict::Pass, "consistent")),
        ];
        let v = Verdicts::of(&records);
        assert_eq!(
            v.run,
            Counts {
                pass: 1,
                warn: 1,
                fail: 0
            }
        );
        assert_eq!(
            v.published,
            Counts {
                pass: 1,
                warn: 0,
                fail: 1
            }
        );
        assert_eq!(v.not_passed.len(), 1);
        assert_eq!(v.findings.len(), 2);
        // A published fail never fails the run; a warn fails it only under --strict.
        assert!(!v.fails_run(false));
        assert!(v.fails_run(true));
        let text = v.render_terminal();
        assert!(text.contains("Checks of this run's data: 1 pass, 1 warn, 0 fail"));
        assert!(text.contains("  WARN  a/native: slow (size=1): a bit slow\n"));
        assert!(text.contains("Findings about the published figures (not failures of this run)"));
        assert!(text.contains("  FAIL  b/native: table (size=1): 4587 tx/s"));
        assert_eq!(Verdicts::of_scenario(&records, "b").run, Counts::default());
    }

    /// The machine's conditions are listed apart and never fail a run, even under --strict.
    #[test]
    fn a_warning_about_the_machine_never_fails_the_run() {
        let steal = |v, m: &str| Check {
            subject: CheckSubject::Machine,
            ..Check::run("hypervisor steal", v, m)
        };
        let records = vec![
            check("a", Check::run("ok", Verdict::Pass, "fine")),
            check("a", steal(Verdict::Warn, "31% stolen")),
            check("b", steal(Verdict::Pass, "0.4% stolen")),
        ];
        let v = Verdicts::of(&records);
        assert_eq!(v.run.pass, 1);
        assert_eq!((v.run.warn, v.run.fail), (0, 0));
        assert_eq!(
            v.machine,
            Counts {
                pass: 1,
                warn: 1,
                fail: 0
            }
        );
        assert_eq!(v.conditions.len(), 1);
        assert!(!v.fails_run(false) && !v.fails_run(true));
        let text = v.render_terminal();
        assert!(
            text.contains("Conditions of the machine (not failures of this run): 1 pass, 1 warn"),
            "{text}"
        );
        assert!(text.contains("  WARN  a/native: hypervisor steal (size=1): 31% stolen\n"));
        assert!(!text.contains("0.4% stolen"));
        // Nothing about the machine to say: no section.
        assert!(
            !Verdicts::of(&records[..1])
                .render_terminal()
                .contains("Conditions")
        );
    }

    #[test]
    fn a_failed_check_of_the_run_fails_it() {
        let v = Verdicts::of(&[check("a", Check::run("x", Verdict::Fail, "bad"))]);
        assert!(v.fails_run(false) && v.fails_run(true));
        let v = Verdicts::of(&[]);
        assert!(!v.fails_run(true));
        assert_eq!(
            v.render_terminal(),
            "Checks of this run's data: 0 pass, 0 warn, 0 fail\n"
        );
    }
}
