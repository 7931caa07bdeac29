//! The self-contained HTML page: styles inline, plots inline as SVG, all text escaped.

use super::{Block, Doc, FINDING, Render};
use crate::html::escape;

/// The HTML page; `svgs[i]` is the SVG text of `doc.plots[i]`.
pub(crate) struct Html<'s> {
    /// The plots' SVG text, in the order of [`Doc::plots`].
    pub svgs: &'s [String],
}

impl Render for Html<'_> {
    fn render(&self, doc: &Doc) -> String {
        let svgs = self.svgs;
        let mut out = format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
            escape(&doc.title)
        );
        html_blocks(doc, svgs, &doc.blocks, &mut out);
        out.push_str("</body>\n</html>\n");
        out
    }
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;\
max-width:1200px;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}\
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
tr:nth-child(even) td{background:#fafafa}\
.error{background:#fde2e1;border-left:6px solid #c62828;padding:0.6em 1em;margin:0.5em 0;font-weight:bold}\
.warning{background:#fff4d6;border-left:6px solid #e0a000;padding:0.6em 1em;margin:0.5em 0}\
.finding{background:#e3effc;border-left:6px solid #1f5fa8;padding:0.6em 1em;margin:0.5em 0}\
.scroll{max-width:100%;overflow-x:auto;margin:0.5em 0 1.5em}.scroll table{margin:0}\
p,li,.error,.warning,.finding,summary,h1,h2,h3,h4{overflow-wrap:anywhere}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}\
h2{border-bottom:2px solid #ddd;padding-bottom:0.2em;margin-top:2em}\
details{margin:1em 0}summary{cursor:pointer;font-weight:bold}";
fn html_blocks(doc: &Doc, svgs: &[String], blocks: &[Block], out: &mut String) {
    for block in blocks {
        match block {
            Block::Heading(2, text) => out.push_str(&format!(
                "<h2 id=\"{}\">{}</h2>\n",
                escape(&crate::cost::section_id(text)),
                escape(text)
            )),
            Block::Heading(level, text) => {
                let l = (*level).clamp(1, 6);
                out.push_str(&format!("<h{l}>{}</h{l}>\n", escape(text)));
            }
            Block::Text(text) => out.push_str(&format!("<p>{}</p>\n", escape(text))),
            Block::Error(text) => out.push_str(&format!(
                "<div class=\"error\">ERROR: {}</div>\n",
                escape(text)
            )),
            Block::Warning(text) => out.push_str(&format!(
                "<div class=\"warning\">Warning: {}</div>\n",
                escape(text)
            )),
            Block::Finding(text) => out.push_str(&format!(
                "<div class=\"finding\">{FINDING}: {}</div>\n",
                escape(text)
            )),
            Block::Table(t) => out.push_str(&t.to_html()),
            Block::Plot(i) => {
                if let (Some(p), Some(svg)) = (doc.plots.get(*i), svgs.get(*i)) {
                    out.push_str(&format!(
                        "<figure id=\"plot-{}\">\n{}\n</figure>\n",
                        escape(&p.name),
                        strip_xml_prolog(svg)
                    ));
                }
            }
            Block::Details(summary, inner) => {
                out.push_str(&format!(
                    "<details><summary>{}</summary>\n",
                    escape(summary)
                ));
                html_blocks(doc, svgs, inner, out);
                out.push_str("</details>\n");
            }
        }
    }
}
/// An SVG document without its `<?xml ...?>` line, for inlining.
fn strip_xml_prolog(svg: &str) -> &str {
    let s = svg.trim_start();
    if s.starts_with("<?xml") {
        match s.find("?>") {
            Some(end) => s[end + 2..].trim_start(),
            None => s,
        }
    } else {
        s
    }
}
