//! The SWF reader keeps the header, round-trips through the writer, reports every
//! malformed line with its line number, and reads the shipped Lublin trace.

use batch::workload::swf::{self, Record, ToJobs};
use proptest::prelude::*;

fn record() -> impl Strategy<Value = Record> {
    (
        prop::array::uniform18(-1i64..10_000_000),
        1i64..1_000_000,
        0i64..100_000_000,
        -1.0f64..1e6,
    )
        .prop_map(|(ints, job, submit, cpu)| {
            let mut f = ints.map(|v| v as f64);
            f[0] = job as f64;
            f[1] = submit as f64;
            f[5] = (cpu * 100.0).round() / 100.0;
            Record { f }
        })
}

proptest! {
    #[test]
    fn round_trip(records in prop::collection::vec(record(), 0..40), header in prop::collection::vec("[A-Za-z]{1,10}: [0-9]{1,6}", 0..5)) {
        let header: Vec<String> = header.into_iter().map(|h| format!("; {h}")).collect();
        let lines = (0..records.len()).map(|k| header.len() + 1 + k).collect();
        let swf = swf::Swf { header, records, lines };
        let text = swf::write(&swf);
        let back = swf::parse(&text).unwrap();
        prop_assert_eq!(&back, &swf);
        prop_assert_eq!(swf::write(&back), text);
    }

    #[test]
    fn never_panics_on_garbage(text in "[ -~\n]{0,400}") {
        let _ = swf::parse(&text);
    }
}

#[test]
fn malformed_lines_are_all_reported_with_line_numbers() {
    let text = "; Version: 2\n\
                1 0 -1 10 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n\
                2 5 -1 10 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1\n\
                \n\
                3 x -1 10 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n\
                4 9 -1 10.5 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n\
                5 9 -1 10 -7 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n\
                6 9 -1 10 1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n";
    let err = swf::parse(text).unwrap_err();
    let lines: Vec<usize> = err.0.iter().map(|e| e.line).collect();
    assert_eq!(lines, vec![3, 5, 6, 7]);
    assert!(
        err.0[0]
            .to_string()
            .starts_with("line 3: expected 18 fields, found 17"),
        "{}",
        err.0[0]
    );
    assert!(
        err.0[1]
            .to_string()
            .contains("field 2 (submit) is not a number"),
        "{}",
        err.0[1]
    );
    assert!(
        err.0[2].to_string().contains("must be an integer"),
        "{}",
        err.0[2]
    );
    assert!(err.0[3].to_string().contains("below -1"), "{}", err.0[3]);
}

#[test]
fn reads_the_lublin_trace() {
    // The trace lives in the shared directory beside the checkouts (worktree or main).
    let dir = env!("CARGO_MANIFEST_DIR");
    let candidates = [
        format!("{dir}/../../../shared/data/lublin-aaroh.swf"),
        format!("{dir}/../../shared/data/lublin-aaroh.swf"),
    ];
    let Some(text) = candidates
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
    else {
        eprintln!("skipping: lublin-aaroh.swf not found beside the checkout");
        return;
    };
    let f = swf::parse(&text).unwrap();
    assert_eq!(f.records.len(), 10_000);
    assert_eq!(swf::max_procs(&f), Some(256));
    assert!(f.header.iter().any(|h| h.contains("Lublin")));
    assert_eq!(swf::parse(&swf::write(&f)).unwrap(), f);
    let (jobs, skipped) = swf::to_jobs(
        &f,
        ToJobs {
            procs: 256,
            pad: 2.0,
            compress: 1.0,
        },
    )
    .unwrap();
    assert_eq!(jobs.len() + skipped, 10_000);
    assert!(
        jobs.iter()
            .all(|j| j.estimate >= j.runtime && j.width <= 256)
    );
}
