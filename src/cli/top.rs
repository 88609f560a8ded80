//! `partita top`: a live view of the manager's partitions and applications (ratatui on
//! crossterm), refreshed several times a second from the same status `partita status --json`
//! prints; `q` (or Esc, Ctrl-C) quits. `--once` prints one frame as text, for scripts.
//!
//! Drawing is a plain function of a [`Status`] into a ratatui buffer ([`draw`]); the live loop
//! and `--once` only differ in where the buffer goes.

use super::{print_out, socket_or_default, CliResult};
use partita_manager::status::{AppStatus, PartitionStatus};
use partita_manager::Status;
use partita_protocol::CpuSet;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table, Widget};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The smallest terminal the view fits in (the application table's columns, the header and a
/// few rows of each table).
pub const MIN_WIDTH: u16 = 72;
/// See [`MIN_WIDTH`].
pub const MIN_HEIGHT: u16 = 14;

/// Options of `partita top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Socket path (default: where applications look: PARTITA_SOCKET, else
    /// $XDG_RUNTIME_DIR/partita.sock if it exists, else /run/partita/partita.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Print one frame as text and exit (size: the terminal's, else $COLUMNS x $LINES, else
    /// 120x40).
    #[arg(long)]
    once: bool,
    /// Refresh period, milliseconds (at most 500: at least two refreshes a second).
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=500))]
    interval_ms: u64,
}

/// Run `partita top`.
pub fn top(args: &TopArgs) -> CliResult {
    let socket = socket_or_default(args.socket.as_deref());
    if args.once {
        let (w, h) = once_size();
        check_size(w, h)?;
        let status = partita_manager::query_status(&socket)?;
        return print_out(&frame_text(&status, &socket, w, h));
    }
    if !std::io::stdout().is_terminal() {
        return Err("partita top needs a terminal (use --once for a single frame)".into());
    }
    let (w, h) = ratatui::crossterm::terminal::size()?;
    check_size(w, h)?;
    live(&socket, Duration::from_millis(args.interval_ms))
}

/// `Err` with a message naming both sizes when `w`×`h` is smaller than the view needs.
pub fn check_size(w: u16, h: u16) -> Result<(), String> {
    if w < MIN_WIDTH || h < MIN_HEIGHT {
        Err(format!(
            "terminal too small for partita top: {w}x{h}, it needs at least {MIN_WIDTH}x{MIN_HEIGHT} \
             (enlarge the window, or use `partita status`)"
        ))
    } else {
        Ok(())
    }
}

/// The size `--once` renders at.
fn once_size() -> (u16, u16) {
    if std::io::stdout().is_terminal() {
        if let Ok(s) = ratatui::crossterm::terminal::size() {
            return s;
        }
    }
    let env = |k: &str, d: u16| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(d)
    };
    (env("COLUMNS", 120), env("LINES", 40))
}

/// Restores the terminal (raw mode off, main screen) however the live view ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// The live view until `q`, Esc or Ctrl-C. A manager that stops answering is shown as an
/// error line and retried; a terminal resized below the minimum ends the view with an error.
fn live(socket: &Path, interval: Duration) -> CliResult {
    let mut terminal = ratatui::try_init()?;
    let _restore = Restore;
    loop {
        let view = partita_manager::query_status(socket).map_err(|e| e.to_string());
        let size = terminal.size()?;
        check_size(size.width, size.height)?;
        terminal.draw(|f| {
            let area = f.area();
            match &view {
                Ok(status) => draw(status, socket, area, f.buffer_mut()),
                Err(e) => draw_error(e, socket, area, f.buffer_mut()),
            }
        })?;
        let next = Instant::now() + interval;
        while let Some(left) = next.checked_duration_since(Instant::now()) {
            if !event::poll(left)? {
                break;
            }
            if let Event::Key(k) = event::read()? {
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if k.kind == KeyEventKind::Press
                    && (matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c)
                {
                    return Ok(());
                }
            }
        }
    }
}

/// One frame at `w`×`h` as text lines (trailing blanks trimmed).
pub fn frame_text(status: &Status, socket: &Path, w: u16, h: u16) -> String {
    let area = Rect::new(0, 0, w, h);
    let mut buf = Buffer::empty(area);
    draw(status, socket, area, &mut buf);
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// What an application is doing, from its numbers: `idle` (no demand), `growing` (fewer
/// workers active than its target), `shrinking` (more), `steady`; `stale` when its heartbeat
/// is older than a second.
pub fn app_state(demand: u32, active: u32, target: u32, heartbeat_age_ms: u64) -> &'static str {
    if heartbeat_age_ms > 1000 {
        "stale"
    } else if demand == 0 && active == 0 {
        "idle"
    } else if active < target {
        "growing"
    } else if active > target {
        "shrinking"
    } else {
        "steady"
    }
}

fn cpus(list: &[usize]) -> String {
    let set: CpuSet = list.iter().copied().collect();
    if set.is_empty() {
        "-".into()
    } else {
        set.to_string()
    }
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// Draw the whole view of `status` into `area` of `buf`.
pub fn draw(status: &Status, socket: &Path, area: Rect, buf: &mut Buffer) {
    let parts = status.partitions.len() as u16;
    let [head, parts_area, apps_area] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(parts + 3),
        Constraint::Min(4),
    ])
    .areas(area);
    header(status, socket, head, buf);
    partitions(&status.partitions, parts_area, buf);
    applications(&status.applications, apps_area, buf);
}

fn header(status: &Status, socket: &Path, area: Rect, buf: &mut Buffer) {
    let ms = status.timestamp_ms;
    let clock = format!(
        "{:02}:{:02}:{:02}.{:03} UTC",
        ms / 3_600_000 % 24,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    );
    let lines = vec![
        Line::styled(
            format!(
                "partita top — {} — updated {clock} — q quits",
                socket.display()
            ),
            bold(),
        ),
        Line::from(format!(
            "CPUs managed: {} ({})   control: {:?}   confinement: {}   reallocations: {}   last moves: {}",
            status.cpus_managed,
            cpus(&status.cpus),
            status.control,
            status.confinement,
            status.reallocations,
            status.last_moves
        )),
    ];
    Paragraph::new(lines).render(area, buf);
}

fn partitions(parts: &[PartitionStatus], area: Rect, buf: &mut Buffer) {
    let rows = parts.iter().map(|p| {
        Row::new(vec![
            p.name.clone(),
            p.fixed_cpus
                .map_or_else(|| p.share.to_string(), |c| format!("{c} cpu")),
            p.entitlement.to_string(),
            p.demand.to_string(),
            p.allocation.to_string(),
            p.lent.to_string(),
            p.borrowed.to_string(),
            p.policy.to_string(),
            format!(
                "{} runnable on {}",
                p.uncontrolled_runnable,
                cpus(&p.uncontrolled_cpus)
            ),
        ])
    });
    let widths = [
        Constraint::Min(10),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Length(13),
        Constraint::Min(12),
    ];
    let header = Row::new([
        "PARTITION",
        "SHARE",
        "ENT",
        "DEMAND",
        "ALLOC",
        "LENT",
        "BORROW",
        "POLICY",
        "UNCONTROLLED",
    ])
    .style(bold());
    Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(" Partitions "))
        .render(area, buf);
}

fn applications(apps: &[AppStatus], area: Rect, buf: &mut Buffer) {
    let rows = apps.iter().map(|a| {
        Row::new(vec![
            a.pid.to_string(),
            a.name.clone(),
            a.partition.clone(),
            a.pool_size.to_string(),
            a.demand.to_string(),
            a.target.to_string(),
            a.active.to_string(),
            cpus(&a.cpus),
            app_state(a.demand, a.active, a.target, a.heartbeat_age_ms).to_string(),
        ])
    });
    let widths = [
        Constraint::Length(7),
        Constraint::Min(8),
        Constraint::Min(9),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Min(6),
        Constraint::Length(9),
    ];
    let header = Row::new([
        "PID",
        "NAME",
        "PARTITION",
        "POOL",
        "DEMAND",
        "TARGET",
        "ACTIVE",
        "CPUS",
        "STATE",
    ])
    .style(bold());
    let title = format!(" Applications ({}) ", apps.len());
    Table::new(rows, widths)
        .header(header)
        .block(Block::bordered().title(title))
        .render(area, buf);
}

/// The view when the manager does not answer (the live view keeps retrying).
fn draw_error(error: &str, socket: &Path, area: Rect, buf: &mut Buffer) {
    Paragraph::new(vec![
        Line::styled(
            format!("partita top — {} — q quits", socket.display()),
            bold(),
        ),
        Line::from(format!("no answer from the manager: {error} (retrying)")),
    ])
    .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_below_the_minimum_are_refused_with_both_sizes_named() {
        assert!(check_size(MIN_WIDTH, MIN_HEIGHT).is_ok());
        let e = check_size(20, 5).unwrap_err();
        assert!(e.contains("20x5") && e.contains("too small"), "{e}");
        assert!(check_size(MIN_WIDTH - 1, 100).is_err());
        assert!(check_size(200, MIN_HEIGHT - 1).is_err());
    }

    #[test]
    fn states_follow_the_numbers() {
        assert_eq!(app_state(2, 1, 2, 0), "growing");
        assert_eq!(app_state(2, 2, 1, 0), "shrinking");
        assert_eq!(app_state(2, 2, 2, 0), "steady");
        assert_eq!(app_state(0, 0, 0, 0), "idle");
        assert_eq!(app_state(2, 2, 2, 5000), "stale");
    }

    fn sample() -> Status {
        let app = |pid: i32, name: &str, active: u32, cpus: Vec<usize>| AppStatus {
            pid,
            name: name.into(),
            partition: "default".into(),
            pool_size: 4,
            demand: 4,
            target: 2,
            active,
            cpus,
            heartbeat_age_ms: 3,
            ..Default::default()
        };
        Status {
            timestamp_ms: 3_723_004,
            cpus: vec![0, 1, 2, 3],
            cpus_managed: 4,
            reallocations: 7,
            confinement: "affinity".into(),
            partitions: vec![PartitionStatus {
                name: "default".into(),
                share: 1,
                entitlement: 4,
                demand: 4,
                allocation: 4,
                ..Default::default()
            }],
            applications: vec![
                app(101, "alpha", 2, vec![0, 1]),
                app(102, "beta", 3, vec![2, 3]),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_frame_shows_every_application_and_partition() {
        let text = frame_text(&sample(), Path::new("/tmp/m.sock"), 100, 20);
        assert!(text.contains("01:02:03.004 UTC"), "{text}");
        assert!(text.contains("CPUs managed: 4 (0-3)"), "{text}");
        let alpha = text.lines().find(|l| l.contains("alpha")).expect(&text);
        assert!(alpha.contains("101") && alpha.contains("0-1") && alpha.contains("steady"));
        let beta = text.lines().find(|l| l.contains("beta")).expect(&text);
        assert!(beta.contains("2-3") && beta.contains("shrinking"), "{beta}");
        assert!(text.contains("Applications (2)") && text.contains("default"));
        assert_eq!(text.lines().count(), 20);
        assert!(text.lines().all(|l| l.chars().count() <= 100));
    }

    #[test]
    fn the_smallest_allowed_frame_still_shows_the_applications() {
        let text = frame_text(&sample(), Path::new("/s"), MIN_WIDTH, MIN_HEIGHT);
        assert!(text.contains("alpha") && text.contains("beta"), "{text}");
    }
}
