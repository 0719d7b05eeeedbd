//! The report's chart as SVG (plotters): requests/s and p99 latency (top panel), units left and
//! each Redis node's scripts/s (bottom panel), against seconds since the sale opened, with the
//! phases shaded and labelled and the stock's turns (sold out, released) marked.

use std::collections::BTreeMap;
use std::ops::Range;

use anyhow::Result;
use plotters::chart::DualCoordChartContext;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::recorder::{Recorder, Sample};
use crate::load::percentile;

/// Width of a chart bucket: requests/s and p99 are computed per 250 ms.
const BUCKET_MS: i64 = 250;

/// Both panels' coordinates: seconds across, a linear scale up.
type Xy = Cartesian2d<RangedCoordf64, RangedCoordf64>;
/// A panel with two y axes: the top one has requests/s on the left and p99 on the right, the
/// bottom one units left on the left and each node's scripts/s on the right.
type DualPanel<'a, 's> = DualCoordChartContext<'a, SVGBackend<'s>, Xy, Xy>;
/// A panel's left axis (what the helpers below draw on).
type Panel<'a, 's> = ChartContext<'a, SVGBackend<'s>, Xy>;

const FONT: (&str, u32) = ("sans-serif", 15);
const BLUE: RGBColor = RGBColor(31, 119, 180);
const RED: RGBColor = RGBColor(214, 39, 40);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const MARK_COLOR: RGBColor = RGBColor(148, 103, 189);
/// The Redis nodes' lines, in turn.
const NODE_COLORS: [RGBColor; 6] = [
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// A line's points: (seconds since the sale opened, value).
type Points = Vec<(f64, f64)>;

/// The chart's data, in seconds since the sale opened.
struct Series {
    /// Requests/s per bucket, empty buckets included (at 0).
    rps: Points,
    /// p99 latency in ms per bucket that has requests.
    p99: Points,
    /// Units left, per stock sample.
    stock: Points,
    /// Each Redis node's scripts/s, per script sample.
    scripts: Vec<Points>,
    /// The time axis: every sample and every phase.
    time: Range<f64>,
}

impl Series {
    fn of(r: &Recorder) -> Self {
        // Everything is shifted so that 0 s is the sale's opening (admission comes before it).
        let open = r.open_ms() as i64;
        let (rps, p99) = load_per_bucket(&r.samples, open);
        let stock = r
            .stock_left
            .iter()
            .map(|(t, l)| (secs(*t, open), *l as f64))
            .collect();
        let nodes = r.node_scripts.first().map_or(0, |s| s.scripts.len());
        let scripts = (0..nodes)
            .map(|i| {
                r.node_scripts
                    .iter()
                    .map(|s| (secs(s.at_ms, open), s.rate(i)))
                    .collect()
            })
            .collect();
        let times = r
            .samples
            .iter()
            .map(|s| s.at_ms)
            .chain(r.stock_left.iter().map(|p| p.0))
            .chain(r.node_scripts.iter().map(|s| s.at_ms))
            .chain(r.phases.iter().map(|p| p.1));
        Series {
            rps,
            p99,
            stock,
            scripts,
            time: time_range(times.map(|t| secs(t, open))),
        }
    }
}

/// `ms` on the recorder's clock as seconds since `open`.
fn secs(ms: u64, open: i64) -> f64 {
    (ms as i64 - open) as f64 / 1000.0
}

/// Requests/s and p99 latency (ms) per bucket of [`BUCKET_MS`], at each bucket's middle in
/// seconds since `open`. Empty buckets are 0 req/s but have no p99.
fn load_per_bucket(samples: &[Sample], open: i64) -> (Points, Points) {
    let mut buckets: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    for s in samples {
        let b = (s.at_ms as i64 - open).div_euclid(BUCKET_MS);
        buckets.entry(b).or_default().push(s.latency_us);
    }
    let (first, last) = match (buckets.keys().next(), buckets.keys().next_back()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => (0, 0),
    };
    let mid = |b: i64| (b * BUCKET_MS + BUCKET_MS / 2) as f64 / 1000.0;
    let rps = (first..=last)
        .map(|b| {
            let n = buckets.get(&b).map_or(0, Vec::len);
            (mid(b), n as f64 * 1000.0 / BUCKET_MS as f64)
        })
        .collect();
    let p99 = buckets
        .iter_mut()
        .map(|(b, l)| {
            l.sort_unstable();
            (mid(*b), percentile(l, 0.99).unwrap_or(0) as f64 / 1000.0)
        })
        .collect();
    (rps, p99)
}

/// The smallest range holding every time; 0–1 s when there are fewer than two distinct ones.
fn time_range(times: impl Iterator<Item = f64>) -> Range<f64> {
    let (t0, t1) = times.fold((f64::MAX, f64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
    if t0 < t1 { t0..t1 } else { 0.0..1.0 }
}

/// The top of an axis: the highest point (1 at least) with headroom, so that the legend does
/// not hide the peaks.
fn top(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.35
}

/// A tick label: whole ticks print without a useless ".0".
fn tick(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The chart of `r`, as an SVG document.
pub fn chart(r: &Recorder) -> Result<String> {
    let s = Series::of(r);
    let (max_rps, max_p99, max_stock) = (top(&s.rps), top(&s.p99), top(&s.stock));
    let max_scripts = s.scripts.iter().map(|p| top(p)).fold(top(&[]), f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 760)).into_drawing_area();
        root.fill(&WHITE)?;
        let body = root.titled(
            "seckill demo: load, latency, stock and Redis nodes over the sale",
            ("sans-serif", 22),
        )?;
        let (upper, lower) = body.split_vertically(440);
        let mut load = load_panel(&upper, s.time.clone(), max_rps, max_p99)?;
        let mut left = stock_panel(&lower, s.time.clone(), max_stock, max_scripts)?;
        draw_phases(&root, &mut load, &mut left, r, s.time.end)?;
        draw_marks(&root, &mut load, &mut left, r)?;
        draw_lines(&mut load, &mut left, s)?;
        root.present()?;
    }
    Ok(svg)
}

/// The top panel's axes; its top margin leaves a strip for the phase labels.
fn load_panel<'a, 's>(
    area: &'a DrawingArea<SVGBackend<'s>, Shift>,
    time: Range<f64>,
    max_rps: f64,
    max_p99: f64,
) -> Result<DualPanel<'a, 's>> {
    let mut load = builder(area)
        .margin_top(56)
        .build_cartesian_2d(time.clone(), 0.0..max_rps)?
        .set_secondary_coord(time, 0.0..max_p99);
    mesh(&mut load, "requests/s")?;
    right_axis(&mut load, "p99 latency (ms)")?;
    Ok(load)
}

/// The bottom panel's axes.
fn stock_panel<'a, 's>(
    area: &'a DrawingArea<SVGBackend<'s>, Shift>,
    time: Range<f64>,
    max_stock: f64,
    max_scripts: f64,
) -> Result<DualPanel<'a, 's>> {
    let mut left = builder(area)
        .build_cartesian_2d(time.clone(), 0.0..max_stock)?
        .set_secondary_coord(time, 0.0..max_scripts);
    mesh(&mut left, "units left")?;
    right_axis(&mut left, "Redis scripts/s per node")?;
    Ok(left)
}

/// What both panels share: margins and the room for the time axis and both y axes (so that
/// both time axes line up).
fn builder<'a, 's>(
    area: &'a DrawingArea<SVGBackend<'s>, Shift>,
) -> ChartBuilder<'a, 'a, SVGBackend<'s>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .right_y_label_area_size(70);
    builder
}

/// A panel's right axis, `y_desc` up.
fn right_axis(panel: &mut DualPanel, y_desc: &str) -> Result<()> {
    panel
        .configure_secondary_axes()
        .y_desc(y_desc)
        .y_label_formatter(&tick)
        .label_style(FONT)
        .axis_desc_style(FONT)
        .draw()?;
    Ok(())
}

/// A panel's grid and axes: time across, `y_desc` up.
fn mesh<'a, 's: 'a>(panel: &mut Panel<'a, 's>, y_desc: &str) -> Result<()> {
    panel
        .configure_mesh()
        .x_desc("time since the sale opened (s)")
        .y_desc(y_desc)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style(FONT)
        .axis_desc_style(FONT)
        .light_line_style(WHITE)
        .draw()?;
    Ok(())
}

/// The phases: alternating shades in both panels, labelled in the strip above the top panel on
/// staggered rows, so that short phases' labels do not overlap. The last runs to `end`.
fn draw_phases(
    root: &DrawingArea<SVGBackend, Shift>,
    load: &mut DualPanel,
    left: &mut DualPanel,
    r: &Recorder,
    end: f64,
) -> Result<()> {
    let open = r.open_ms() as i64;
    let (max_rps, max_stock) = (y_top(load), y_top(left));
    let mut rows = Rows::default();
    for (i, (phase, at)) in r.phases.iter().enumerate() {
        let from = secs(*at, open);
        let to = r.phases.get(i + 1).map_or(end, |p| secs(p.1, open));
        let shade = BLACK.mix(if i % 2 == 0 { 0.04 } else { 0.10 }).filled();
        load.draw_series([Rectangle::new([(from, 0.0), (to, max_rps)], shade)])?;
        left.draw_series([Rectangle::new([(from, 0.0), (to, max_stock)], shade)])?;
        let (x, y) = load.backend_coord(&(from, max_rps));
        let row = rows.place(x, phase.label());
        root.draw(&Text::new(
            phase.label(),
            (x + 3, y - 52 + row * 17),
            ("sans-serif", 14),
        ))?;
        root.draw(&PathElement::new(
            [(x, y - 52 + row * 17), (x, y)],
            BLACK.mix(0.4),
        ))?;
    }
    Ok(())
}

/// The stock's turns: a vertical line in both panels, named in the bottom one.
fn draw_marks(
    root: &DrawingArea<SVGBackend, Shift>,
    load: &mut DualPanel,
    left: &mut DualPanel,
    r: &Recorder,
) -> Result<()> {
    let open = r.open_ms() as i64;
    let (max_rps, max_stock) = (y_top(load), y_top(left));
    let mut rows = Rows::default();
    for (name, at) in &r.marks {
        let x = secs(*at, open);
        let style = MARK_COLOR.stroke_width(2);
        load.draw_series([PathElement::new([(x, 0.0), (x, max_rps)], style)])?;
        left.draw_series([PathElement::new([(x, 0.0), (x, max_stock)], style)])?;
        let (px, py) = left.backend_coord(&(x, max_stock));
        let row = rows.place(px, name);
        root.draw(&Text::new(
            *name,
            (px + 4, py + 4 + row * 17),
            ("sans-serif", 14).into_font().color(&MARK_COLOR),
        ))?;
    }
    Ok(())
}

/// The top of a panel's (primary) y axis.
fn y_top(panel: &Panel) -> f64 {
    panel.y_range().end
}

/// The lines and their legends: in the top panel's upper right, and in the bottom panel's
/// middle right (the marks' names take the top, and the stock is near 0 by the end).
fn draw_lines<'a, 's: 'a>(
    load: &mut DualPanel<'a, 's>,
    left: &mut DualPanel<'a, 's>,
    s: Series,
) -> Result<()> {
    let line = |color: RGBColor| color.stroke_width(2);
    load.draw_series(LineSeries::new(s.rps, line(BLUE)))?
        .label("requests/s (all endpoints, per 250 ms)")
        .legend(legend(line(BLUE)));
    load.draw_secondary_series(LineSeries::new(s.p99, line(RED)))?
        .label("p99 latency in ms (right axis)")
        .legend(legend(line(RED)));
    legend_box(load, SeriesLabelPosition::UpperRight)?;
    left.draw_series(LineSeries::new(s.stock, line(GREEN)))?
        .label("units left in Redis")
        .legend(legend(line(GREEN)));
    for (i, points) in s.scripts.into_iter().enumerate() {
        let style = line(NODE_COLORS[i % NODE_COLORS.len()]);
        left.draw_secondary_series(LineSeries::new(points, style))?
            .label(format!("Redis node {i}: scripts/s (right axis)"))
            .legend(legend(style));
    }
    legend_box(left, SeriesLabelPosition::MiddleRight)
}

/// A legend's sample of a line drawn in `style`.
fn legend(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style)
}

/// Draws a panel's legend at `position`.
fn legend_box<'a, 's: 'a>(panel: &mut Panel<'a, 's>, position: SeriesLabelPosition) -> Result<()> {
    panel
        .configure_series_labels()
        .position(position)
        .label_font(FONT)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

/// Rows for chart labels placed left to right: each label goes on the first row whose last
/// label has ended, so that labels near each other do not overlap (three rows at most; past
/// that, the row that frees up first).
#[derive(Default)]
struct Rows {
    /// Where each row's last label ends, in pixels.
    ends: [i32; 3],
}

impl Rows {
    /// The row for a label starting at pixel `x`.
    fn place(&mut self, x: i32, text: &str) -> i32 {
        let row = (0..3)
            .find(|r| self.ends[*r] <= x)
            .unwrap_or_else(|| (0..3).min_by_key(|r| self.ends[*r]).unwrap_or(0));
        // About 7 px a character at the labels' size, and a small gap.
        self.ends[row] = x + 7 * text.chars().count() as i32 + 8;
        row as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::recorder::synthetic;

    /// The chart names its axes with units, its series and the phases, in real text elements.
    #[test]
    fn chart_has_axes_legend_and_phases() {
        let svg = chart(&synthetic()).unwrap();
        for text in [
            "time since the sale opened (s)",
            "requests/s",
            "p99 latency (ms)",
            "units left",
            "requests/s (all endpoints, per 250 ms)",
            "p99 latency in ms (right axis)",
            "units left in Redis",
            "Redis scripts/s per node",
            "Redis node 0: scripts/s (right axis)",
            "Redis node 1: scripts/s (right axis)",
            "admission tokens",
            "waiting for start",
            "buy wave, polls, payments",
            "payment window",
            "resale",
            "drain settles",
            "sold out",
            "units released",
        ] {
            assert!(
                svg.contains(&format!(">\n{text}\n</text>"))
                    || svg.contains(&format!(">{text}</text>")),
                "no text element {text:?} in the chart"
            );
        }
        // Tick labels too: the axes are numbered.
        assert!(svg.matches("<text").count() > 40, "too few text elements");
        assert!(svg.contains("<polyline"), "no line series");
    }

    /// Labels close together go on different rows; one far enough right goes back to the first.
    #[test]
    fn labels_near_each_other_take_other_rows() {
        let mut rows = Rows::default();
        let placed: Vec<i32> = [
            (100, "sold out"),
            (110, "units released"),
            (120, "sold out"),
        ]
        .iter()
        .map(|(x, t)| rows.place(*x, t))
        .collect();
        assert_eq!(placed, [0, 1, 2]);
        assert_eq!(rows.place(300, "resale"), 0);
    }

    fn sample(at_ms: u64, latency_us: u64) -> Sample {
        Sample {
            endpoint: "buy",
            class: None,
            at_ms,
            latency_us,
            host_us: None,
            socket_us: None,
            queued_us: None,
            status: 202,
            shed: false,
        }
    }

    /// Two requests in a 250 ms bucket are 8 req/s; the bucket's point sits at its middle,
    /// in seconds since the opening.
    #[test]
    fn load_per_bucket_counts_requests_per_second() {
        let samples = [sample(1_000, 2_000), sample(1_200, 4_000)];
        let (rps, p99) = load_per_bucket(&samples, 1_000);
        assert_eq!(rps, [(0.125, 8.0)]);
        assert_eq!(p99, [(0.125, 4.0)]);
    }

    /// A bucket without requests is 0 req/s and has no p99; buckets before the opening are
    /// at negative times.
    #[test]
    fn load_per_bucket_keeps_empty_buckets_at_zero() {
        let samples = [sample(900, 1_000), sample(1_300, 3_000)];
        let (rps, p99) = load_per_bucket(&samples, 1_000);
        assert_eq!(rps, [(-0.125, 4.0), (0.125, 0.0), (0.375, 4.0)]);
        assert_eq!(p99, [(-0.125, 1.0), (0.375, 3.0)]);
    }

    #[test]
    fn time_range_spans_every_time() {
        assert_eq!(time_range([2.0, -1.5, 7.25].into_iter()), -1.5..7.25);
    }

    #[test]
    fn time_range_of_one_instant_is_the_first_second() {
        assert_eq!(time_range([3.0].into_iter()), 0.0..1.0);
        assert_eq!(time_range(std::iter::empty()), 0.0..1.0);
    }

    /// 35% above the highest point, and never below 1.35 (an axis of nothing still has height).
    #[test]
    fn top_leaves_headroom_above_the_peak() {
        assert_eq!(top(&[(0.0, 100.0), (1.0, 40.0)]), 135.0);
        assert_eq!(top(&[(0.0, 0.0)]), 1.35);
        assert_eq!(top(&[]), 1.35);
    }

    #[test]
    fn tick_drops_a_useless_decimal() {
        assert_eq!(tick(&4.0), "4");
        assert_eq!(tick(&-2.0), "-2");
        assert_eq!(tick(&2.5), "2.5");
    }
}
