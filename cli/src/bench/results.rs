//! Benchmark results as data: each benchmark's table — its figures, and the machine, commit,
//! date and command that measured them, with the peers measured beside — printed, recorded in
//! `benches/results.json` (`--record`, replacing the table of the same id), and rendered into
//! `docs/benchmarks.md` ([`render`]), which a test keeps equal to the file.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Every recorded table, in page order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// The tables.
    pub tables: Vec<Table>,
}

/// One table of current figures: one figure per row and column.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// A stable id: a recorded table replaces the one with its id.
    pub id: String,
    /// The page's section it belongs in.
    pub section: String,
    /// What it measures.
    pub title: String,
    /// The machine it was measured on.
    pub machine: String,
    /// The commit measured.
    pub commit: String,
    /// The day it was measured.
    pub date: String,
    /// The command that measures it.
    pub command: String,
    /// How to read it, in a sentence or three.
    pub note: String,
    /// Column headings.
    pub columns: Vec<String>,
    /// The rows, a cell per column.
    pub rows: Vec<Vec<String>>,
    /// Other systems measured beside it, on the same machine in the same session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<Peer>,
}

/// A peer's figure beside a table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Peer {
    /// The system and its setting.
    pub name: String,
    /// Its figure, with its unit.
    pub figure: String,
    /// The command that measured it (none for a published figure).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
}

impl Table {
    /// A table of `columns` measured now, on this machine, by this process's command line.
    pub fn measured(id: &str, section: &str, title: &str, columns: &[&str]) -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Table {
            id: id.into(),
            section: section.into(),
            title: title.into(),
            machine: machine(),
            commit: commit(),
            date: today(),
            command: format!("rowshard {}", args.join(" ")),
            note: String::new(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: Vec::new(),
            peers: Vec::new(),
        }
    }

    /// Prints the table as aligned text, under its title.
    pub fn print(&self) {
        println!("{}", self.title);
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r[c].chars().count())
                    .chain([self.columns[c].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, &w)| format!("{cell:<w$}"))
                .collect();
            println!("{}", padded.join("  ").trim_end());
        };
        line(&self.columns);
        for row in &self.rows {
            line(row);
        }
    }

    /// Records the table in the results file at `path`: in the place of the table of its id,
    /// or after the last table of its section.
    pub fn record(&self, path: &Path) -> Result<(), String> {
        let mut results = Results::load(path).unwrap_or_default();
        match results.tables.iter().position(|t| t.id == self.id) {
            Some(at) => {
                let mut table = self.clone();
                // A re-run keeps the peers measured beside the table and its reading notes.
                if table.note.is_empty() {
                    table.note = results.tables[at].note.clone();
                }
                table.peers = results.tables[at].peers.clone();
                results.tables[at] = table;
            }
            None => {
                let at = results
                    .tables
                    .iter()
                    .rposition(|t| t.section == self.section)
                    .map_or(results.tables.len(), |i| i + 1);
                results.tables.insert(at, self.clone());
            }
        }
        results.save(path)
    }
}

impl Results {
    /// Reads the results file at `path`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Writes the results file at `path`, through a temporary file.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let json = serde_json::to_string_pretty(self).map_err(|e| e.to_string())? + "\n";
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// The benchmarks page: `template` with its `{{tables}}` line replaced by every table, grouped
/// in sections in the order of their first table.
pub fn render(results: &Results, template: &str) -> String {
    let mut sections: Vec<&str> = Vec::new();
    for t in &results.tables {
        if !sections.contains(&t.section.as_str()) {
            sections.push(&t.section);
        }
    }
    let mut out = String::new();
    for section in sections {
        out.push_str(&format!("## {section}\n\n"));
        for t in results.tables.iter().filter(|t| t.section == section) {
            out.push_str(&format!("### {}\n\n", t.title));
            out.push_str(&format!(
                "*{} · commit `{}` · {}* — `{}`\n\n",
                t.machine, t.commit, t.date, t.command
            ));
            if !t.note.is_empty() {
                out.push_str(&format!("{}\n\n", t.note));
            }
            let cells = |cells: &[String]| {
                let escaped: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
                format!("| {} |\n", escaped.join(" | "))
            };
            out.push_str(&cells(&t.columns));
            out.push_str(&format!("|{}\n", "---|".repeat(t.columns.len())));
            for row in &t.rows {
                out.push_str(&cells(row));
            }
            if !t.peers.is_empty() {
                out.push_str("\nBeside it, the same machine and session:\n\n");
                for p in &t.peers {
                    out.push_str(&format!(
                        "- {}: **{}** (`{}`)\n",
                        p.name, p.figure, p.command
                    ));
                }
            }
            out.push('\n');
        }
    }
    template.replace("{{tables}}\n", &out)
}

/// This machine's processor and cores, as `/proc/cpuinfo` names them.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1))
        .map_or("unknown processor", str::trim)
        .to_string();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores")
}

/// The commit measured: `ROWSHARD_COMMIT`, or git's short hash of the checkout.
fn commit() -> String {
    if let Ok(commit) = std::env::var("ROWSHARD_COMMIT") {
        return commit;
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Today, as `YYYY-MM-DD` (UTC).
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_table_replaces_its_id_and_keeps_its_peers() {
        let path = std::env::temp_dir().join(format!("results-{}.json", std::process::id()));
        let mut a = Table::measured("a", "S", "A", &["x"]);
        a.rows.push(vec!["1".into()]);
        a.peers.push(Peer::default());
        a.record(&path).unwrap();
        Table::measured("b", "T", "B", &["y"])
            .record(&path)
            .unwrap();
        let mut again = Table::measured("a", "S", "A", &["x"]);
        again.rows.push(vec!["2".into()]);
        again.record(&path).unwrap();
        let results = Results::load(&path).unwrap();
        let ids: Vec<&str> = results.tables.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(results.tables[0].rows, [["2"]]);
        assert_eq!(results.tables[0].peers.len(), 1);
        let page = render(&results, "# P\n\n{{tables}}\nend\n");
        assert!(
            page.starts_with("# P\n\n## S\n\n### A\n") && page.ends_with("end\n"),
            "{page}"
        );
        assert!(today().len() == 10);
        std::fs::remove_file(path).unwrap();
    }
}
