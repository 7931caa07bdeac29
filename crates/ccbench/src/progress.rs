//! Progress bars on stderr, drawn only when stderr is a terminal and `--quiet` is not given.

use std::io::IsTerminal;
use std::time::Duration;

use harness::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar for one scenario at a time.
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    /// A bar that draws to stderr if it is a terminal and `quiet` is false.
    pub fn new(quiet: bool) -> Self {
        let target = if quiet || !std::io::stderr().is_terminal() {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        let style = ProgressStyle::with_template(
            "{spinner} {prefix:>12.bold} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Bar { bar }
    }

    /// Names the scenario being run.
    pub fn scenario(&self, name: &str) {
        self.bar.set_prefix(name.to_owned());
        self.bar.set_position(0);
        self.bar.set_length(0);
        self.bar.set_message("");
    }

    /// Removes the bar.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }

    /// Prints a line above the bar (or plainly when hidden).
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }
}

impl Progress for Bar {
    fn begin(&self, label: &str, total: u64) {
        self.bar.set_message(label.to_owned());
        self.bar.set_position(0);
        self.bar.set_length(total);
    }

    fn advance(&self, n: u64) {
        self.bar.inc(n);
    }
}
