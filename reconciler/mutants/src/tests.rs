use super::*;

#[test]
fn names_round_trip() {
    for m in Mutant::ALL {
        assert_eq!(m.name().parse::<Mutant>(), Ok(m));
    }
    assert!("no-such"
        .parse::<Mutant>()
        .unwrap_err()
        .contains("expected one of"));
}

#[cfg(feature = "compiled")]
#[test]
fn selection_is_per_thread_and_restored() {
    assert!(!active(Mutant::NoPeriodicTimer));
    {
        let _g = select(Some(Mutant::NoPeriodicTimer)).unwrap();
        assert!(active(Mutant::NoPeriodicTimer));
        assert!(!active(Mutant::FirstSwitchOnly));
        // Another thread (another run) does not see it.
        std::thread::spawn(|| assert!(!active(Mutant::NoPeriodicTimer)))
            .join()
            .unwrap();
    }
    assert!(!active(Mutant::NoPeriodicTimer));
}

#[cfg(not(feature = "compiled"))]
#[test]
fn a_build_without_the_mutants_refuses_to_select_one() {
    assert!(!COMPILED);
    assert!(select(None).is_ok());
    let refused = select(Some(Mutant::OwnByIp)).err().expect("refused");
    assert!(
        refused.contains("build with --features mutants"),
        "{refused}"
    );
}

#[test]
fn the_catalogue_lists_each_mutant_once_in_order() {
    assert_eq!(Mutant::ALL.len(), 11);
    assert_eq!(Mutant::ALL[0], Mutant::FirstSwitchOnly);
    assert_eq!(Mutant::ALL[10], Mutant::SagaSkipsUndo);
    let mut names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Mutant::ALL.len());
}
