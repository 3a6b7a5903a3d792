//! The Standard Workload Format (SWF) of the Parallel Workloads Archive: one job per line,
//! 18 whitespace-separated numeric fields, `;` comment lines forming the header. The reader
//! keeps the header, validates every record and reports every malformed line with its line
//! number (never a panic); the writer produces text the reader reads back identically.
//! Turning records into jobs refuses a job wider than the machine and a trace with no
//! job to run, naming the line, rather than simulating something else than was asked.

use thiserror::Error;

use crate::job::Job;
use crate::utility::Utility;

/// Field names, in order.
pub const FIELDS: [&str; 18] = [
    "job",
    "submit",
    "wait",
    "runtime",
    "procs",
    "avg_cpu",
    "mem",
    "req_procs",
    "req_time",
    "req_mem",
    "status",
    "user",
    "group",
    "exe",
    "queue",
    "partition",
    "preceding",
    "think",
];

/// One record; `-1` means unknown, as in the format.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record {
    /// The 18 fields. Integral everywhere except average CPU time and memory.
    pub f: [f64; 18],
}

impl Record {
    /// Field `i` as an integer (truncated).
    pub fn int(&self, i: usize) -> i64 {
        self.f[i] as i64
    }
}

/// A parsed SWF file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Swf {
    /// Header comment lines, verbatim (with their leading `;`).
    pub header: Vec<String>,
    /// Job records in file order.
    pub records: Vec<Record>,
    /// The 1-based line number of each record (parallel to `records`).
    pub lines: Vec<usize>,
}

/// One malformed line.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("line {line}: {why}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

/// Every malformed line of a file.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{} malformed line(s); first: {}", .0.len(), .0[0])]
pub struct SwfErrors(pub Vec<LineError>);

fn parse_line(line: &str) -> Result<Record, String> {
    let toks: Vec<&str> = line.split_whitespace().collect();
    if toks.len() != 18 {
        return Err(format!("expected 18 fields, found {}", toks.len()));
    }
    let mut f = [0.0; 18];
    for (k, tok) in toks.iter().enumerate() {
        let v: f64 = tok
            .parse()
            .map_err(|_| format!("field {} ({}) is not a number: {tok:?}", k + 1, FIELDS[k]))?;
        if !v.is_finite() {
            return Err(format!("field {} ({}) is not finite", k + 1, FIELDS[k]));
        }
        let integral = !matches!(k, 5 | 6 | 9);
        if integral && v.fract() != 0.0 {
            return Err(format!(
                "field {} ({}) must be an integer: {tok}",
                k + 1,
                FIELDS[k]
            ));
        }
        if v < -1.0 && k != 16 {
            return Err(format!(
                "field {} ({}) is below -1: {tok}",
                k + 1,
                FIELDS[k]
            ));
        }
        f[k] = v;
    }
    if f[0] < 1.0 {
        return Err("job number must be at least 1".into());
    }
    if f[1] < 0.0 {
        return Err("submit time must be known (>= 0)".into());
    }
    Ok(Record { f })
}

/// Parses SWF text, collecting every malformed line.
pub fn parse(text: &str) -> Result<Swf, SwfErrors> {
    let mut swf = Swf::default();
    let mut errors = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with(';') {
            swf.header.push(trimmed.to_string());
            continue;
        }
        match parse_line(trimmed) {
            Ok(r) => {
                swf.records.push(r);
                swf.lines.push(n + 1);
            }
            Err(why) => errors.push(LineError { line: n + 1, why }),
        }
    }
    if errors.is_empty() {
        Ok(swf)
    } else {
        Err(SwfErrors(errors))
    }
}

/// Writes SWF text that [`parse`] reads back to an equal value.
pub fn write(swf: &Swf) -> String {
    let mut out = String::new();
    for h in &swf.header {
        out.push_str(h);
        out.push('\n');
    }
    for r in &swf.records {
        let fields: Vec<String> = r.f.iter().map(|v| format!("{v}")).collect();
        out.push_str(&fields.join(" "));
        out.push('\n');
    }
    out
}

/// The machine size from a `; MaxProcs:` or `; MaxNodes:` header line.
pub fn max_procs(swf: &Swf) -> Option<u32> {
    swf.header.iter().find_map(|h| {
        let h = h.trim_start_matches(';').trim();
        let (k, v) = h.split_once(':')?;
        matches!(k.trim(), "MaxProcs" | "MaxNodes")
            .then(|| v.trim().parse().ok())
            .flatten()
    })
}

/// How to turn records into jobs.
#[derive(Debug, Clone, Copy)]
pub struct ToJobs {
    /// Machine size; a wider job is an error.
    pub procs: u32,
    /// Estimates are `runtime * pad` when the record has no usable requested time
    /// (1.0 = exact runtimes, as Lee's Table 4.2).
    pub pad: f64,
    /// Divide submit times by this (>1 raises the offered load).
    pub compress: f64,
}

/// Why records cannot be simulated as asked.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobsError {
    /// A job needs more processors than the machine has.
    #[error("line {line}: job {job} needs {width} processors, the machine has {procs}")]
    TooWide {
        /// 1-based line number (0 when the records were not parsed from text).
        line: usize,
        /// The job number.
        job: i64,
        /// Processors it needs.
        width: i64,
        /// Processors in the machine.
        procs: u32,
    },
    /// Nothing to simulate.
    #[error("no job to simulate ({records} records, {skipped} without a runtime or width)")]
    Empty {
        /// Records in the trace.
        records: usize,
        /// Records skipped for want of a runtime or width.
        skipped: usize,
    },
}

/// Jobs from records: width from allocated (else requested) processors, estimate from the
/// requested time when it is at least the runtime, else `runtime * pad`. Records with no
/// runtime or width (cancelled jobs) are skipped and counted; a job wider than the machine
/// or a trace left with no job is an error.
pub fn to_jobs(swf: &Swf, how: ToJobs) -> Result<(Vec<Job>, usize), JobsError> {
    let mut jobs = Vec::new();
    let mut skipped = 0;
    for (k, r) in swf.records.iter().enumerate() {
        let runtime = r.int(3);
        let width = if r.int(4) > 0 { r.int(4) } else { r.int(7) };
        if runtime < 1 || width < 1 {
            skipped += 1;
            continue;
        }
        if width > how.procs as i64 {
            return Err(JobsError::TooWide {
                line: swf.lines.get(k).copied().unwrap_or(0),
                job: r.int(0),
                width,
                procs: how.procs,
            });
        }
        let req = r.int(8);
        let estimate = if req >= runtime {
            req
        } else {
            ((runtime as f64 * how.pad).ceil() as i64).max(runtime)
        };
        jobs.push(Job {
            id: r.int(0) as u64,
            submit: (r.f[1] / how.compress.max(1e-9)).round() as i64,
            width: width as u32,
            runtime,
            estimate,
            utility: Utility::constant(0),
            queue: r.int(14).clamp(0, 255) as u8,
            class: 0,
        });
    }
    if jobs.is_empty() {
        return Err(JobsError::Empty {
            records: swf.records.len(),
            skipped,
        });
    }
    Ok((jobs, skipped))
}
