//! `marketsim doc`: runs every study behind `docs/ECONOMICS.md` (library
//! `batch::report`), writes their CSV files and SVG plots beside it, and assembles the
//! document from the library's prose.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use batch::experiments;
use batch::report::{charts, prose, study};

use crate::{read_swf, write};

/// Regenerates `out/ECONOMICS.md` and `out/economics/*`.
pub fn generate(out: &Path, swf: &Path, quick: bool) -> Result<()> {
    let t0 = Instant::now();
    let dir = out.join("economics");
    let cmd = prose::command(&swf.display().to_string(), quick);
    let mut doc = prose::header(&cmd, quick);

    let (base, seeds) = study::chun_base(quick);
    doc.push_str(&prose::chun_intro(&base, seeds));
    let mut all = Vec::new();
    for s in study::chun_sweeps() {
        eprintln!("sweep {} ({:.0?} so far)", s.key, t0.elapsed());
        let pts = study::run_sweep(&s, &base, seeds, &mut |m| eprintln!("  {m}"))?;
        let (label, key) = (s.param.label(), s.key);
        write(
            &dir.join(format!("sweep-{key}.csv")),
            &experiments::sweep_csv(&pts),
        )?;
        let title = format!("Aggregate utility vs {label}");
        write(
            &dir.join(format!("sweep-{key}.svg")),
            &charts::sweep_chart(&pts, &title, label, true),
        )?;
        doc.push_str(&prose::sweep(&s, &base, seeds, &pts));
        all.push((s, pts));
    }
    doc.push_str(&prose::chun_verdicts(&all));

    eprintln!("trace study ({:.0?} so far)", t0.elapsed());
    let trace = read_swf(swf)?;
    let lee = study::run_lee(&trace, quick, &mut |m| eprintln!("  {m}"))?;
    write(&dir.join("lee-trace.csv"), &study::lee_csv(&lee))?;
    write(&dir.join("lee-trace.svg"), &charts::lee_chart(&lee.rows))?;
    doc.push_str(&prose::lee(&lee, &swf.display().to_string(), &cmd));

    eprintln!("geweke study ({:.0?} so far)", t0.elapsed());
    doc.push_str("## 3. The Vickrey economy (Geweke)\n\n");
    let mut runs = Vec::new();
    for width in [1u32, 4] {
        let run = study::run_geweke(width, quick, &mut |m| eprintln!("  {m}"))?;
        write(
            &dir.join(format!("geweke-delay-w{width}.svg")),
            &charts::geweke_delay_chart(&run),
        )?;
        write(
            &dir.join(format!("geweke-price-w{width}.svg")),
            &charts::geweke_price_chart(&run),
        )?;
        doc.push_str(&prose::geweke(&run));
        runs.push(run);
    }
    write(&dir.join("geweke.csv"), &study::geweke_csv(&runs))?;
    doc.push_str(prose::geweke_discussion());
    doc.push_str(&format!("\n---\nGenerated in {:.0?}.\n", t0.elapsed()));
    write(&out.join("ECONOMICS.md"), &doc)?;
    eprintln!(
        "wrote {} in {:.0?}",
        out.join("ECONOMICS.md").display(),
        t0.elapsed()
    );
    Ok(())
}
