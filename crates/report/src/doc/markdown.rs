//! The report as GitHub markdown.

use super::{Block, Doc, FINDING, Render};
use crate::html::escape;
use crate::table::markdown_cell;

/// GitHub markdown, ending with one newline; plots are referenced as `plots/<name>.svg`.
pub(crate) struct Markdown;

impl Render for Markdown {
    fn render(&self, doc: &Doc) -> String {
        let mut out = String::new();
        markdown_blocks(doc, &doc.blocks, &mut out);
        while out.ends_with("\n\n") {
            out.pop();
        }
        out
    }
}

/// Markdown text outside tables: one line, `<` escaped so no markup slips through.
fn md_text(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
}
fn markdown_blocks(doc: &Doc, blocks: &[Block], out: &mut String) {
    for block in blocks {
        match block {
            Block::Heading(level, text) => {
                out.push_str(&"#".repeat(usize::from(*level).clamp(1, 6)));
                out.push(' ');
                out.push_str(&md_text(text));
                out.push_str("\n\n");
            }
            Block::Text(text) => {
                out.push_str(&md_text(text));
                out.push_str("\n\n");
            }
            Block::Error(text) => {
                out.push_str(&format!("> **ERROR:** {}\n\n", md_text(text)));
            }
            Block::Warning(text) => {
                out.push_str(&format!("> **Warning:** {}\n\n", md_text(text)));
            }
            Block::Finding(text) => {
                out.push_str(&format!("> **{FINDING}:** {}\n\n", md_text(text)));
            }
            Block::Table(t) => {
                out.push_str(&t.to_markdown());
                out.push('\n');
            }
            Block::Plot(i) => {
                if let Some(p) = doc.plots.get(*i) {
                    out.push_str(&format!(
                        "![{}](plots/{}.svg)\n\n",
                        markdown_cell(&md_text(p.chart.title())).replace(['[', ']'], ""),
                        p.name
                    ));
                }
            }
            Block::Details(summary, inner) => {
                out.push_str(&format!(
                    "<details><summary>{}</summary>\n\n",
                    escape(summary)
                ));
                markdown_blocks(doc, inner, out);
                out.push_str("</details>\n\n");
            }
        }
    }
}
