//! The report for a terminal: box tables, no plots.

use super::{Block, Doc, FINDING, Render};
use crate::table::{Charset, to_ascii};

/// Box tables drawn with the given characters; plots and folded blocks are left out.
pub(crate) struct Terminal {
    /// Unicode box drawing or plain ASCII.
    pub charset: Charset,
}

impl Render for Terminal {
    fn render(&self, doc: &Doc) -> String {
        let charset = self.charset;
        let text = |s: &str| match charset {
            Charset::Unicode => s.to_owned(),
            Charset::Ascii => to_ascii(s),
        };
        let mut out = String::new();
        for block in &doc.blocks {
            match block {
                Block::Heading(level, t) => {
                    let t = text(t);
                    let n = t.chars().count();
                    match level {
                        1 => out.push_str(&format!("{t}\n{}\n", "=".repeat(n))),
                        2 => out.push_str(&format!("\n{t}\n{}\n", "-".repeat(n))),
                        _ => out.push_str(&format!("\n{t}\n")),
                    }
                }
                Block::Text(t) => {
                    out.push_str(&text(t));
                    out.push('\n');
                }
                Block::Error(t) => out.push_str(&format!("ERROR: {}\n", text(t))),
                Block::Warning(t) => out.push_str(&format!("warning: {}\n", text(t))),
                Block::Finding(t) => out.push_str(&format!("{FINDING}: {}\n", text(t))),
                Block::Table(t) => out.push_str(&t.to_terminal(charset)),
                Block::Plot(_) | Block::Details(..) => {}
            }
        }
        out
    }
}
