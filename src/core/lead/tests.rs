use super::history::{MAX_AGE_S, MAX_SAMPLES};
use super::*;

const NOW: f64 = 1_800_000_000.0;

fn sample(id: &str, ago: f64, seconds: f64) -> LeadSample {
    LeadSample {
        id: id.into(),
        at: NOW - ago,
        seconds,
    }
}

fn book(rows: &[(Phase, &str, &[f64])]) -> LeadBook {
    let mut b = LeadBook::default();
    for (phase, scope, durations) in rows {
        for (i, d) in durations.iter().enumerate() {
            let id = format!("{}-{scope}-{i}", phase.as_str());
            assert!(b.learn(*phase, scope, sample(&id, 600.0 - i as f64, *d), NOW));
        }
    }
    b
}

#[test]
fn window_rules() {
    // (what, samples learned in order (id, seconds ago, duration), expected learn results, q, expected quantile)
    type Row = (
        &'static str,
        Vec<(&'static str, f64, f64)>,
        Vec<bool>,
        Option<f64>,
    );
    let rows: Vec<Row> = vec![
        (
            "two samples are too few",
            vec![("a", 10.0, 30.0), ("b", 5.0, 40.0)],
            vec![true, true],
            None,
        ),
        (
            "nearest rank: the 0.9 quantile of 30, 40, 50 is 50",
            vec![("a", 10.0, 30.0), ("b", 5.0, 50.0), ("c", 1.0, 40.0)],
            vec![true, true, true],
            Some(50.0),
        ),
        (
            "the same object twice is learned once",
            vec![
                ("a", 10.0, 30.0),
                ("a", 10.0, 30.0),
                ("b", 5.0, 30.0),
                ("c", 1.0, 30.0),
            ],
            vec![true, false, true, true],
            Some(30.0),
        ),
        (
            "negative, NaN and hour-long durations are not cold starts",
            vec![
                ("a", 10.0, -1.0),
                ("b", 9.0, f64::NAN),
                ("c", 8.0, 3_601.0),
                ("d", 7.0, 20.0),
            ],
            vec![false, false, false, true],
            None,
        ),
        (
            "a week-old sample is not learned and does not count",
            vec![
                ("a", MAX_AGE_S + 1.0, 30.0),
                ("b", 5.0, 30.0),
                ("c", 4.0, 30.0),
            ],
            vec![false, true, true],
            None,
        ),
    ];
    for (what, learned, expect, quantile) in rows {
        let mut w = LeadHistory::default();
        let got: Vec<bool> = learned
            .iter()
            .map(|(id, ago, d)| w.learn(sample(id, *ago, *d), NOW))
            .collect();
        assert_eq!(got, expect, "{what}");
        assert_eq!(w.quantile(0.9, NOW), quantile, "{what}");
    }
}

#[test]
fn the_window_keeps_the_newest_max_samples() {
    let mut w = LeadHistory::default();
    for i in 0..MAX_SAMPLES + 10 {
        // The first ten are slow; the window forgets them.
        let d = if i < 10 { 500.0 } else { 60.0 };
        assert!(w.learn(sample(&format!("n{i}"), 10_000.0 - i as f64, d), NOW));
    }
    assert_eq!(w.samples.len(), MAX_SAMPLES);
    assert_eq!(w.quantile(1.0, NOW), Some(60.0));
    // An object older than everything a full window keeps was forgotten once; not again.
    assert!(!w.learn(sample("late", 20_000.0, 500.0), NOW));
}

#[test]
fn samples_age_out_of_the_quantile() {
    let mut w = LeadHistory::default();
    for (i, ago) in [100.0, 50.0, 10.0].iter().enumerate() {
        w.learn(sample(&format!("s{i}"), *ago, 30.0), NOW);
    }
    assert_eq!(w.quantile(0.5, NOW), Some(30.0));
    // 60 s after the first sample turns a week old, only two are live.
    assert_eq!(w.quantile(0.5, NOW - 100.0 + MAX_AGE_S + 60.0), None);
}

#[test]
fn horizon_table() {
    // (what, book, expected seconds, learned?)
    let boots: &[f64] = &[28.0, 31.0, 30.0, 33.0];
    let pulls: &[f64] = &[5.0, 6.0, 4.0];
    let loads: &[f64] = &[40.0, 44.0, 41.0];
    let rows: Vec<(&str, LeadBook, f64, bool)> = vec![
        (
            "nothing learned: the configured lead",
            LeadBook::default(),
            180.0,
            false,
        ),
        (
            "a phase short of samples: the configured lead",
            book(&[
                (Phase::NodeBoot, "gpu", boots),
                (Phase::ImagePull, "llm", pulls),
                (Phase::ModelLoad, "llm", &loads[..2]),
            ]),
            180.0,
            false,
        ),
        (
            // q 0.9 of 4 boots is the 4th (33), of 3 pulls the 3rd (6), of 3 loads the 3rd (44):
            // 83 s, rounded up to whole 15 s steps: 90 s.
            "every phase learned: the sum of upper quantiles in whole steps",
            book(&[
                (Phase::NodeBoot, "gpu", boots),
                (Phase::ImagePull, "llm", pulls),
                (Phase::ModelLoad, "llm", loads),
            ]),
            90.0,
            true,
        ),
        (
            "boots are per pool: another pool's do not count",
            book(&[
                (Phase::NodeBoot, "cpu", boots),
                (Phase::ImagePull, "llm", pulls),
                (Phase::ModelLoad, "llm", loads),
            ]),
            180.0,
            false,
        ),
        (
            "loads are per target: another target's do not count",
            book(&[
                (Phase::NodeBoot, "gpu", boots),
                (Phase::ImagePull, "llm", pulls),
                (Phase::ModelLoad, "other", loads),
            ]),
            180.0,
            false,
        ),
    ];
    for (what, b, seconds, learned) in rows {
        let h = horizon(&b, "gpu", "llm", 0.9, 180.0, 15.0, NOW);
        assert_eq!(h.seconds, seconds, "{what}: {h:?}");
        assert_eq!(h.learned(), learned, "{what}: {h:?}");
        if !learned {
            let reason = h.fallback.unwrap();
            assert!(
                reason.starts_with("LEAD_TIME_SECONDS (180 s)"),
                "{what}: {reason}"
            );
        }
    }
}

#[test]
fn parts_that_fill_whole_steps_do_not_round_up_a_step_on_float_noise() {
    // 30.3 + 117.9 + 31.8 is 180 exactly, but 180.00000000000003 in floating point.
    let b = book(&[
        (Phase::NodeBoot, "gpu", &[30.3; 3]),
        (Phase::ImagePull, "llm", &[117.9; 3]),
        (Phase::ModelLoad, "llm", &[31.8; 3]),
    ]);
    assert_eq!(
        horizon(&b, "gpu", "llm", 0.9, 60.0, 15.0, NOW).seconds,
        180.0
    );
}

#[test]
fn the_fallback_names_each_phase_short_of_samples() {
    let b = book(&[
        (Phase::NodeBoot, "gpu", &[30.0, 31.0, 32.0]),
        (Phase::ModelLoad, "llm", &[40.0]),
    ]);
    let h = horizon(&b, "gpu", "llm", 0.9, 120.0, 15.0, NOW);
    assert_eq!(
        h.fallback.as_deref(),
        Some("LEAD_TIME_SECONDS (120 s) until every phase is learned: image-pull in llm has 0 of 3 samples; model-load in llm has 1 of 3 samples")
    );
    assert_eq!(h.phases[0].seconds, Some(32.0));
}

#[test]
fn the_book_serialises_as_one_flat_object() {
    let b = book(&[(Phase::NodeBoot, "gpu", &[30.0])]);
    let json = serde_json::to_value(&b).unwrap();
    assert_eq!(
        json["windows"]["node-boot/gpu"]["samples"][0]["seconds"],
        30.0
    );
    let back: LeadBook = serde_json::from_value(json).unwrap();
    assert_eq!(back, b);
}

/// The book after a tick, by hand: the start book holds boot "a"; a target learned load "b".
/// The environment keeps both; the store gets them only when it lacks one, and only when there
/// is a store to write.
#[test]
fn the_book_after_a_tick_is_kept_and_written_when_the_store_lacks_it() {
    let start = {
        let mut b = LeadBook::default();
        assert!(b.learn(Phase::NodeBoot, "gpu", sample("a", 60.0, 30.0), NOW));
        b
    };
    let load = Learned {
        phase: Phase::ModelLoad,
        scope: "llama".into(),
        sample: sample("b", 30.0, 20.0),
    };
    let both = {
        let mut b = start.clone();
        assert!(b.learn(Phase::ModelLoad, "llama", sample("b", 30.0, 20.0), NOW));
        b
    };
    // (name, learned, stored, kept, written)
    type Row<'a> = (
        &'a str,
        Vec<Learned>,
        Option<LeadBook>,
        &'a LeadBook,
        Option<&'a LeadBook>,
    );
    let rows: [Row; 4] = [
        (
            "no store (not read, or DRY_RUN)",
            vec![load.clone()],
            None,
            &both,
            None,
        ),
        (
            "an empty store gets both",
            vec![load.clone()],
            Some(LeadBook::default()),
            &both,
            Some(&both),
        ),
        (
            "a store with both gets nothing",
            vec![load.clone()],
            Some(both.clone()),
            &both,
            None,
        ),
        (
            "nothing learned, the store lacks the boot",
            vec![],
            Some(LeadBook::default()),
            &start,
            Some(&start),
        ),
    ];
    for (name, learned, stored, kept, written) in rows {
        let after = book_after_tick(start.clone(), &learned, stored.as_ref(), NOW);
        assert_eq!(&after.keep, kept, "{name}");
        assert_eq!(after.write.as_ref(), written, "{name}");
    }
}
