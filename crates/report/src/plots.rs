//! Charts drawn with `plotters`, as SVG text and as PNG bytes.
//!
//! PNG text is rasterised from DejaVu Sans, bundled in the binary (`assets/`), so that plots are
//! readable on a machine without system fonts or fontconfig. SVG text names `sans-serif` and is
//! laid out by whatever displays it; the bundled font only sizes it.

use std::ops::Range;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::units;

/// Width of every plot, in pixels.
pub(crate) const WIDTH: u32 = 900;
/// Height of every plot, in pixels.
pub(crate) const HEIGHT: u32 = 500;

const FONT: &str = "sans-serif";
static FONT_DATA: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const GREY: RGBColor = RGBColor(150, 150, 150);

/// Registers the bundled font with plotters once per process.
fn ensure_font() -> Result<(), String> {
    static LOADED: OnceLock<bool> = OnceLock::new();
    let ok = *LOADED
        .get_or_init(|| plotters::style::register_font(FONT, FontStyle::Normal, FONT_DATA).is_ok());
    if ok {
        Ok(())
    } else {
        Err("the bundled font could not be loaded".to_owned())
    }
}

/// How the numbers on an axis are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fmt {
    /// Nanoseconds as a duration.
    Duration,
    /// Events per second.
    Rate,
    /// A ratio (`2.00×`).
    Ratio,
    /// A fraction shown as a percentage (`0.5` -> `50%`).
    Fraction,
    /// Counts.
    Count,
    /// Thread counts: integers only.
    Threads,
    /// A size on a log2 axis: `v` is log2 of a byte count, shown as bytes at whole powers.
    Log2Bytes,
    /// Bytes per second.
    ByteRate,
}

impl Fmt {
    /// An axis tick: like [`Fmt::apply`], but ratios without trailing zeros (`0.5×`, `2×`).
    fn tick(self, v: f64) -> String {
        match self {
            Fmt::Ratio => {
                let s = format!("{v:.2}");
                let s = s.trim_end_matches('0').trim_end_matches('.');
                format!("{s}×")
            }
            _ => self.apply(v),
        }
    }

    fn apply(self, v: f64) -> String {
        match self {
            Fmt::Duration => units::duration_ns(v),
            Fmt::Rate => units::rate(v),
            Fmt::Ratio => units::ratio(v),
            Fmt::Fraction => format!("{:.0}%", v * 100.0),
            Fmt::Count => {
                if v >= 0.0 && v.fract() == 0.0 {
                    units::count(v as u64)
                } else {
                    format!("{v:.1}")
                }
            }
            Fmt::Threads => {
                if v.fract().abs() < 1e-9 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            }
            Fmt::Log2Bytes => {
                if v.fract().abs() < 1e-9 {
                    units::bytes(v.exp2())
                } else {
                    String::new()
                }
            }
            Fmt::ByteRate => units::bytes_rate(v),
        }
    }
}

/// One point of a line; hollow points mark oversubscription (threads > cores).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    pub x: f64,
    pub y: f64,
    pub hollow: bool,
}

/// One line of a line chart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub label: String,
    pub points: Vec<Point>,
}

/// A reference line drawn in grey.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Reference {
    /// Ideal speed-up: `y = x / base`.
    Ideal { base: f64 },
    /// A horizontal line (ideal efficiency).
    Level(f64),
}

/// Lines over a numeric x axis.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LineChart {
    pub title: String,
    pub x_label: String,
    /// How x ticks read: [`Fmt::Threads`] or [`Fmt::Log2Bytes`].
    pub x_fmt: Fmt,
    pub y_label: String,
    pub y_fmt: Fmt,
    pub log_y: bool,
    pub legend_low: bool,
    pub series: Vec<Series>,
    pub reference: Option<Reference>,
}

/// Horizontal bars, one per label, top to bottom; the last `summary` bars are drawn in grey.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BarChart {
    pub title: String,
    pub x_label: String,
    pub fmt: Fmt,
    pub labels: Vec<String>,
    pub values: Vec<f64>,
    pub summary: usize,
}

/// A histogram over a duration axis.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistChart {
    pub title: String,
    pub x_label: String,
    /// `(low, high, count)` per bin, increasing.
    pub bins: Vec<(f64, f64, u64)>,
    pub log_x: bool,
    /// Vertical marker lines (`p50`, `p99`, ...).
    pub markers: Vec<(String, f64)>,
}

/// One measurement over runs: each run's median with its 95% interval, the change points
/// as vertical lines between the runs they separate, and each segment's median.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrendChart {
    pub title: String,
    /// The run number under each point (x tick labels).
    pub runs: Vec<i64>,
    /// `(low, median, high)` per run, ns.
    pub points: Vec<(f64, f64, f64)>,
    /// Per change point: the index of the first point after it.
    pub steps: Vec<usize>,
    /// Per segment between change points (one more than `steps`): its median, ns.
    pub levels: Vec<f64>,
}

/// A chart of any kind.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chart {
    Lines(LineChart),
    Bars(BarChart),
    Hist(HistChart),
    Trend(TrendChart),
}

impl Chart {
    /// The chart's title.
    pub fn title(&self) -> &str {
        match self {
            Chart::Lines(c) => &c.title,
            Chart::Bars(c) => &c.title,
            Chart::Hist(c) => &c.title,
            Chart::Trend(c) => &c.title,
        }
    }

    /// The chart as an SVG document.
    pub fn to_svg(&self) -> Result<String, String> {
        ensure_font()?;
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(&root)?;
            root.present().map_err(err)?;
        }
        Ok(out)
    }

    /// The chart as PNG bytes.
    pub fn to_png(&self) -> Result<Vec<u8>, String> {
        ensure_font()?;
        let mut rgb = vec![255u8; WIDTH as usize * HEIGHT as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(&root)?;
            root.present().map_err(err)?;
        }
        let mut png_bytes = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut png_bytes, WIDTH, HEIGHT);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut w = enc.write_header().map_err(err)?;
            w.write_image_data(&rgb).map_err(err)?;
            w.finish().map_err(err)?;
        }
        Ok(png_bytes)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        match self.tamed() {
            Chart::Lines(c) => draw_lines(root, &c),
            Chart::Bars(c) => draw_bars(root, &c),
            Chart::Hist(c) => draw_hist(root, &c),
            Chart::Trend(c) => draw_trend(root, &c),
        }
    }

    /// The chart with every coordinate within ±[`LIMIT`] (see [`tame`]).
    fn tamed(&self) -> Chart {
        let mut c = self.clone();
        match &mut c {
            Chart::Lines(l) => {
                for p in l.series.iter_mut().flat_map(|s| s.points.iter_mut()) {
                    p.x = tame(p.x);
                    p.y = tame(p.y);
                }
                if let Some(Reference::Level(v)) = &mut l.reference {
                    *v = tame(*v);
                }
            }
            Chart::Bars(b) => b.values.iter_mut().for_each(|v| *v = tame(*v)),
            Chart::Hist(h) => {
                for b in &mut h.bins {
                    (b.0, b.1) = (tame(b.0), tame(b.1));
                }
            }
            Chart::Trend(t) => {
                for p in &mut t.points {
                    *p = (tame(p.0), tame(p.1), tame(p.2));
                }
                t.levels.iter_mut().for_each(|v| *v = tame(*v));
            }
        }
        c
    }
}

/// The largest magnitude a coordinate is drawn at. plotters maps a value to a pixel through
/// `i32` and loops on an axis whose span is not finite; values up to ±1e300 keep every span
/// (and its padding) finite. Only a hand-made results file holds larger ones.
const LIMIT: f64 = 1e300;

/// `v` clamped to ±[`LIMIT`]; not a number stays so (and is left out where drawn).
fn tame(v: f64) -> f64 {
    v.clamp(-LIMIT, LIMIT)
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Draws the chart's legend (its labelled series) at `pos`, in the style of every plot.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(pos)
        .label_font((FONT, 12))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(err)
}

fn finite_max(it: impl Iterator<Item = f64>) -> Option<f64> {
    it.filter(|v| v.is_finite()).reduce(f64::max)
}

fn finite_min(it: impl Iterator<Item = f64>) -> Option<f64> {
    it.filter(|v| v.is_finite()).reduce(f64::min)
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &LineChart,
) -> Result<(), String> {
    let xs = || c.series.iter().flat_map(|s| s.points.iter().map(|p| p.x));
    let (mut x0, mut x1) = (
        finite_min(xs()).unwrap_or(0.0),
        finite_max(xs()).unwrap_or(1.0),
    );
    if x1 <= x0 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    // A little room so that markers at the ends are not cut (none when the span itself is
    // beyond f64, which only a hand-made file gives).
    let pad = Some((x1 - x0) * 0.03)
        .filter(|p| p.is_finite())
        .unwrap_or(0.0);
    let (x0, x1) = (x0 - pad, x1 + pad);
    let mut ys: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.y))
        .filter(|y| y.is_finite())
        .collect();
    match c.reference {
        Some(Reference::Ideal { base }) if base > 0.0 => {
            ys.extend([tame(x0 / base), tame(x1 / base)]);
        }
        Some(Reference::Level(v)) => ys.push(v),
        _ => {}
    }
    let ymax = finite_max(ys.iter().copied())
        .unwrap_or(1.0)
        .max(f64::MIN_POSITIVE);
    // Leave the top of the plot free for the legend (or a margin when it sits low).
    let entries = c.series.len() + usize::from(c.reference.is_some());
    let legend_px = if c.legend_low {
        30.0
    } else {
        entries as f64 * 19.0 + 30.0
    };
    let frac = (legend_px / (f64::from(HEIGHT) - 120.0)).clamp(0.08, 0.6);
    if c.log_y {
        let ymin = finite_min(ys.iter().copied().filter(|y| *y > 0.0)).unwrap_or(ymax / 10.0);
        let (lo, hi) = ((ymin / 1.3).ln(), ymax.ln());
        let top = hi + (hi - lo).max(0.1) * frac / (1.0 - frac);
        lines_on(root, c, x0..x1, (lo.exp()..top.exp()).log_scale())
    } else {
        // From 0, or from the lowest value when one is below 0 (a negative time in a
        // hand-edited file): every point lies on the axis, which plotters needs (a point far
        // off it maps to a pixel beyond i32).
        let ymin = finite_min(ys.iter().copied()).unwrap_or(0.0).min(0.0);
        let top = ymax + (ymax - ymin) * frac / (1.0 - frac);
        lines_on(root, c, x0..x1, ymin..top)
    }
}

fn lines_on<DB, Y>(
    root: &DrawingArea<DB, Shift>,
    c: &LineChart,
    x: Range<f64>,
    y: Y,
) -> Result<(), String>
where
    DB: DrawingBackend,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 20))
        .margin(15)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(x.clone(), y)
        .map_err(err)?;
    let xf = |v: &f64| c.x_fmt.apply(*v);
    let yf = |v: &f64| c.y_fmt.tick(*v);
    // One tick per unit up to 17 (a span beyond usize, or not a number, gives 17 or 2).
    let x_ticks = ((x.end - x.start).round() + 1.0).clamp(2.0, 17.0) as usize;
    let x_ticks = x_ticks.max(2);
    chart
        .configure_mesh()
        .x_labels(x_ticks)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(4)
        .draw()
        .map_err(err)?;
    match c.reference {
        Some(Reference::Ideal { base }) if base > 0.0 => {
            let line = vec![(x.start, tame(x.start / base)), (x.end, tame(x.end / base))];
            chart
                .draw_series(LineSeries::new(line, GREY.stroke_width(1)))
                .map_err(err)?
                .label("ideal")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY));
        }
        Some(Reference::Level(v)) => {
            chart
                .draw_series(LineSeries::new(
                    vec![(x.start, v), (x.end, v)],
                    GREY.stroke_width(1),
                ))
                .map_err(err)?
                .label("ideal")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREY));
        }
        _ => {}
    }
    for (i, s) in c.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.y.is_finite())
            .map(|p| (p.x, p.y))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(err)?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(s.points.iter().filter(|p| p.y.is_finite()).map(|p| {
                if p.hollow {
                    Circle::new((p.x, p.y), 5, color.stroke_width(2))
                } else {
                    Circle::new((p.x, p.y), 4, color.filled())
                }
            }))
            .map_err(err)?;
    }
    let pos = if c.legend_low {
        SeriesLabelPosition::LowerLeft
    } else {
        SeriesLabelPosition::UpperLeft
    };
    legend(&mut chart, pos)?;
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &BarChart,
) -> Result<(), String> {
    let n = c.labels.len().min(c.values.len());
    let xmax = finite_max(c.values.iter().copied())
        .filter(|v| *v > 0.0)
        .unwrap_or(1.0)
        * 1.2;
    let label_chars = c
        .labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(4);
    let label_area = (label_chars as u32 * 8 + 16).clamp(60, 320);
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 20))
        .margin(15)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(label_area)
        .build_cartesian_2d(0.0..xmax, (0..n.max(1) - 1).into_segmented())
        .map_err(err)?;
    // Bar i is drawn in slot n - 1 - i so that the first label is at the top.
    let slot_label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(slot) if *slot < n => c.labels[n - 1 - slot].clone(),
        _ => String::new(),
    };
    let xf = |v: &f64| c.fmt.tick(*v);
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n.max(1))
        .y_label_formatter(&slot_label)
        .x_label_formatter(&xf)
        .x_desc(c.x_label.as_str())
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(4)
        .draw()
        .map_err(err)?;
    let summary_from = n.saturating_sub(c.summary);
    chart
        .draw_series((0..n).map(|i| {
            let slot = n - 1 - i;
            let color = if i >= summary_from {
                GREY
            } else {
                PALETTE[i % PALETTE.len()]
            };
            let v = if c.values[i].is_finite() {
                c.values[i].max(0.0)
            } else {
                0.0
            };
            let mut r = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(slot)),
                    (v, SegmentValue::Exact(slot + 1)),
                ],
                color.filled(),
            );
            r.set_margin(4, 4, 0, 0);
            r
        }))
        .map_err(err)?;
    chart
        .draw_series((0..n).map(|i| {
            let slot = n - 1 - i;
            let v = if c.values[i].is_finite() {
                c.values[i].max(0.0)
            } else {
                0.0
            };
            Text::new(
                format!(" {}", c.fmt.apply(c.values[i])),
                (v, SegmentValue::CenterOf(slot)),
                (FONT, 12).into_font().color(&BLACK),
            )
        }))
        .map_err(err)?;
    Ok(())
}

fn draw_trend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &TrendChart,
) -> Result<(), String> {
    let n = c.points.len();
    let ys = || {
        c.points
            .iter()
            .flat_map(|p| [p.0, p.1, p.2])
            .chain(c.levels.iter().copied())
    };
    // The axis spans the data, not zero: a trend is read for steps of a few percent.
    let (lo, hi) = match (finite_min(ys()), finite_max(ys())) {
        (Some(lo), Some(hi)) if hi > lo => (lo, hi),
        (Some(v), _) => (v - v.abs().max(1.0) * 0.1, v + v.abs().max(1.0) * 0.1),
        _ => (0.0, 1.0),
    };
    let pad = Some((hi - lo) * 0.06)
        .filter(|p| p.is_finite())
        .unwrap_or(0.0);
    // Room above for the legend.
    let (y0, y1) = (lo - pad, hi + pad + (hi - lo) * 0.25);
    let x = -0.5..(n.max(1) as f64 - 0.5);
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 18))
        .margin(15)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(90)
        .build_cartesian_2d(x.clone(), y0..y1)
        .map_err(err)?;
    // Ticks at whole positions name the run there; others stay blank.
    let xf = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
            c.runs[i as usize].to_string()
        } else {
            String::new()
        }
    };
    let yf = |v: &f64| units::duration_ns(*v);
    chart
        .configure_mesh()
        .x_labels(n.clamp(2, 17))
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .x_desc("run")
        .y_desc("median (95% CI)")
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(4)
        .draw()
        .map_err(err)?;
    let color = PALETTE[0];
    let finite = |p: &&(f64, f64, f64)| p.0.is_finite() && p.1.is_finite() && p.2.is_finite();
    chart
        .draw_series(
            c.points
                .iter()
                .enumerate()
                .filter(|(_, p)| finite(p))
                .map(|(i, p)| {
                    let x = i as f64;
                    PathElement::new(vec![(x, p.0), (x, p.2)], color.stroke_width(1))
                }),
        )
        .map_err(err)?;
    let line: Vec<(f64, f64)> = c
        .points
        .iter()
        .enumerate()
        .filter(|(_, p)| finite(p))
        .map(|(i, p)| (i as f64, p.1))
        .collect();
    chart
        .draw_series(LineSeries::new(line.clone(), color.stroke_width(1)))
        .map_err(err)?
        .label("median, 95% CI")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    chart
        .draw_series(line.iter().map(|&p| Circle::new(p, 3, color.filled())))
        .map_err(err)?;
    // Segment medians, from change point to change point.
    let level = PALETTE[1];
    let mut bounds = vec![0usize];
    bounds.extend(c.steps.iter().copied());
    bounds.push(n);
    let segments: Vec<(f64, f64, f64)> = bounds
        .windows(2)
        .zip(&c.levels)
        .filter(|(_, v)| v.is_finite())
        .map(|(w, v)| (w[0] as f64 - 0.4, w[1] as f64 - 0.6, *v))
        .collect();
    if !segments.is_empty() {
        chart
            .draw_series(
                segments.iter().map(|&(a, b, v)| {
                    PathElement::new(vec![(a, v), (b, v)], level.stroke_width(2))
                }),
            )
            .map_err(err)?
            .label("segment median")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], level.stroke_width(2))
            });
    }
    let red = PALETTE[3];
    if !c.steps.is_empty() {
        chart
            .draw_series(c.steps.iter().map(|&i| {
                let x = i as f64 - 0.5;
                PathElement::new(vec![(x, y0), (x, y1)], red.stroke_width(2))
            }))
            .map_err(err)?
            .label("change point")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}

fn draw_hist<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &HistChart,
) -> Result<(), String> {
    let lo = finite_min(c.bins.iter().map(|b| b.0)).unwrap_or(0.0);
    let hi = finite_max(c.bins.iter().map(|b| b.1)).unwrap_or(1.0);
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, hi + 0.5)
    };
    if c.log_x && lo > 0.0 {
        hist_on(root, c, (lo..hi).log_scale())
    } else {
        hist_on(root, c, lo..hi)
    }
}

fn hist_on<DB, X>(root: &DrawingArea<DB, Shift>, c: &HistChart, x: X) -> Result<(), String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let ymax = c.bins.iter().map(|b| b.2).max().unwrap_or(1).max(1) as f64 * 1.12;
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 20))
        .margin(15)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(x, 0.0..ymax)
        .map_err(err)?;
    let xf = |v: &f64| units::duration_ns(*v);
    let yf = |v: &f64| Fmt::Count.apply(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .x_desc(c.x_label.as_str())
        .y_desc("count")
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(4)
        .draw()
        .map_err(err)?;
    let color = PALETTE[0];
    chart
        .draw_series(
            c.bins.iter().filter(|b| b.2 > 0).map(|&(l, h, n)| {
                Rectangle::new([(l, 0.0), (h, n as f64)], color.mix(0.75).filled())
            }),
        )
        .map_err(err)?;
    let (x0, x1) = (
        chart.x_range().start.min(chart.x_range().end),
        chart.x_range().start.max(chart.x_range().end),
    );
    for (i, (label, v)) in c.markers.iter().enumerate() {
        let mcolor = PALETTE[(i + 1) % PALETTE.len()];
        // A marker off the axis (a summary that disagrees with the samples, which only a
        // hand-edited file holds) is named in the legend but not drawn: plotters maps a value
        // far off the axis to a pixel beyond i32.
        let on_axis = (x0..=x1).contains(v);
        let line = if on_axis {
            vec![(*v, 0.0), (*v, ymax)]
        } else {
            Vec::new()
        };
        let text = format!("{label} = {}", units::duration_ns(*v));
        chart
            .draw_series(LineSeries::new(line, mcolor.stroke_width(2)))
            .map_err(err)?
            .label(if on_axis {
                text
            } else {
                format!("{text} (off the axis)")
            })
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], mcolor.stroke_width(2))
            });
    }
    if !c.markers.is_empty() {
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

/// Bins raw samples into at most `max_bins` equal-width bins between their minimum and maximum.
pub(crate) fn bin_samples(samples: &[f64], max_bins: usize) -> Vec<(f64, f64, u64)> {
    // Within ±LIMIT, so that the bins' width is finite.
    let finite: Vec<f64> = samples
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .map(tame)
        .collect();
    let (Some(lo), Some(hi)) = (
        finite_min(finite.iter().copied()),
        finite_max(finite.iter().copied()),
    ) else {
        return Vec::new();
    };
    if hi <= lo {
        let half = (lo.abs() * 0.01).max(0.5);
        return vec![(lo - half, lo + half, finite.len() as u64)];
    }
    let bins = ((finite.len() as f64).sqrt() * 2.0).ceil() as usize;
    let bins = bins.clamp(5, max_bins.max(5));
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0u64; bins];
    for x in finite {
        let i = (((x - lo) / width) as usize).min(bins - 1);
        counts[i] += 1;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(i, n)| (lo + i as f64 * width, lo + (i + 1) as f64 * width, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binning_keeps_every_sample() {
        let samples: Vec<f64> = (0..100).map(|i| i as f64).collect();
        let bins = bin_samples(&samples, 30);
        assert_eq!(bins.iter().map(|b| b.2).sum::<u64>(), 100);
        assert_eq!(bins[0].0, 0.0);
        assert!((bins[bins.len() - 1].1 - 99.0).abs() < 1e-9);
        let one = bin_samples(&[5.0, 5.0], 30);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].2, 2);
        assert!(bin_samples(&[], 30).is_empty());
    }

    /// Both formats of a chart render without a panic.
    fn renders(chart: &Chart) {
        assert!(chart.to_svg().unwrap().contains("<svg"));
        assert!(chart.to_png().is_ok());
    }

    #[test]
    fn a_marker_off_the_axis_is_named_not_drawn() {
        // Found by the results_reader fuzz target: a summary whose p95 (4.8e16 ns) lies far
        // beyond the samples' bins mapped to a pixel past i32 and overflowed in plotters.
        let chart = Chart::Hist(HistChart {
            title: "seal".into(),
            x_label: "time".into(),
            bins: bin_samples(&[4117.0, 4200.0, 4300.0, 48_732_735.0], 40),
            log_x: false,
            markers: vec![
                ("median".into(), 4194.0),
                ("p95".into(), 4.79e16),
                ("p99".into(), -1e300),
            ],
        });
        renders(&chart);
        let svg = chart.to_svg().unwrap();
        assert!(svg.contains("median = "), "{svg}");
        assert!(
            svg.contains("p95 = ") && svg.contains("(off the axis)"),
            "{svg}"
        );
    }

    #[test]
    fn charts_of_values_off_any_sane_scale_render() {
        // A linear y axis started at 0, and a point far below it (a negative time in a
        // hand-edited file) overflowed the same way; an axis whose span is beyond f64 made
        // plotters loop.
        let chart = |reference| {
            Chart::Lines(LineChart {
                title: "sweep".into(),
                x_label: "threads".into(),
                x_fmt: Fmt::Threads,
                y_label: "speed-up".into(),
                y_fmt: Fmt::Ratio,
                log_y: false,
                legend_low: false,
                series: vec![Series {
                    label: "seal".into(),
                    points: vec![
                        Point {
                            x: -1e300,
                            y: -1e300,
                            hollow: false,
                        },
                        Point {
                            x: 2.0,
                            y: 1.5,
                            hollow: true,
                        },
                    ],
                }],
                reference,
            })
        };
        renders(&chart(None));
        renders(&chart(Some(Reference::Ideal { base: 1.0 })));
        renders(&chart(Some(Reference::Level(-1e300))));
        // Spans beyond f64 on both axes.
        let mut wide = chart(Some(Reference::Ideal { base: 1e-300 }));
        if let Chart::Lines(c) = &mut wide {
            c.series[0].points[1].x = 1.7e308;
            c.series[0].points[1].y = 1.7e308;
            c.series[0].points[0].x = -1.7e308;
            c.series[0].points[0].y = -1.7e308;
        }
        renders(&wide);
        // And a histogram of samples that span all of f64.
        renders(&Chart::Hist(HistChart {
            title: "wide".into(),
            x_label: "time".into(),
            bins: bin_samples(&[-1.7e308, 0.0, 1.7e308], 40),
            log_x: false,
            markers: vec![("median".into(), 0.0), ("p95".into(), f64::INFINITY)],
        }));
        let bars = Chart::Bars(BarChart {
            title: "stages".into(),
            x_label: "time".into(),
            fmt: Fmt::Duration,
            labels: vec!["a".into(), "b".into()],
            values: vec![1.7e308, f64::MAX],
            summary: 0,
        });
        renders(&bars);
    }

    #[test]
    fn svg_and_png_render() {
        let chart = Chart::Bars(BarChart {
            title: "stages <&>".into(),
            x_label: "time".into(),
            fmt: Fmt::Duration,
            labels: vec!["garble".into(), "total".into()],
            values: vec![1500.0, 2000.0],
            summary: 1,
        });
        let svg = chart.to_svg().unwrap();
        assert!(svg.contains("<svg"));
        assert!(svg.contains("stages &lt;&amp;&gt;"));
        let png = chart.to_png().unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
}
