use super::*;
use racksim_sim::{Action, At};

const GOOD: &str = r#"name = "t"
description = "d"
rack = "madrid"
ntp_return_switch = "switch1"

[[step]]
at = "0s"
action = "hide-switch"
switch = "switch1"

[[step]]
at = "5m..8m"
action = "reveal-switch"
switch = "switch1"

[expect.sled-task]
outcome = "converges"
within = "10m"

[expect.legacy]
outcome = "fails"
deadline = "2h"
"#;

fn error_of(text: &str) -> ScenarioError {
    parse("t.toml", text).expect_err("the file must be rejected")
}

/// The error of `text`, which must be refused with a message that says
/// `says`.
fn refused_with(text: &str, says: &str) -> ScenarioError {
    let e = error_of(text);
    assert!(e.message.contains(says), "{e}");
    e
}

/// [`GOOD`] with `lines` added after its line `line`.
fn good_with(line: &str, lines: &str) -> String {
    GOOD.replace(line, &format!("{line}\n{lines}"))
}

#[test]
fn a_good_file_parses() {
    let s = parse("t.toml", GOOD).unwrap();
    assert_eq!(s.plan.steps.len(), 2);
    assert_eq!(
        s.plan.steps[1].at,
        At::Window(Duration::from_secs(300), Duration::from_secs(480))
    );
    assert_eq!(
        s.expectations[&Strategy::nat(ServiceNat::SLED_TASK)].outcome,
        Outcome::ConvergesWithin(Duration::from_secs(600))
    );
    assert_eq!(
        s.expectations[&Strategy::nat(ServiceNat::LEGACY)].deadline,
        Duration::from_secs(7200)
    );
    // `converges` runs until `within` plus the stability window.
    assert_eq!(
        s.expectations[&Strategy::nat(ServiceNat::SLED_TASK)].deadline,
        Duration::from_secs(660)
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_duration("10000h").unwrap(), raw::MAX_DURATION);
    // Too long: refused by name, never saturated (issue 39).
    for long in [
        "10000h1us",
        "5124095577h",
        "99999999999999999999h",
        "9000h9000h",
        "600001m",
    ] {
        let e = parse_duration(long).unwrap_err();
        assert!(
            e.contains("longer than the longest racksim simulates, 10000h"),
            "{long}: {e}"
        );
    }
    for bad in ["", "5", "m", "5 minutes", "-1s", "1d"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
    }
}

#[test]
fn unknown_field_points_at_it() {
    error_at(
        &good_with("within = \"10m\"", "withn = \"1m\""),
        (19, 1),
        "unknown field `withn`",
    );
}

#[test]
fn bad_duration_points_at_the_value() {
    error_at(
        &GOOD.replace("at = \"0s\"", "at = \"soon\""),
        (7, 6),
        "invalid duration \"soon\"",
    );
}

#[test]
fn unknown_switch_is_named_with_the_known_ones() {
    let e = error_of(&GOOD.replace(
        "action = \"hide-switch\"\nswitch = \"switch1\"",
        "action = \"hide-switch\"\nswitch = \"switch7\"",
    ));
    assert_eq!((e.line, e.column), (9, 10), "{e}");
    assert!(e.message.contains("unknown switch \"switch7\""), "{e}");
    assert_eq!(
        e.hint.as_deref(),
        Some("switches of this rack: switch0, switch1")
    );
}

#[test]
fn step_after_deadline_is_rejected() {
    let e = error_of(&GOOD.replace("5m..8m", "5m..3h"));
    assert_eq!(e.line, 12, "{e}");
    assert!(e.message.contains("not before the deadline"), "{e}");
}

/// Each expectation's run ends at its own deadline, so a step after the
/// shortest one is refused even when another expectation's deadline is
/// later (issue 39: legacy's "5m" silently dropped the 6m17s reveal).
#[test]
fn every_expectations_deadline_is_checked_against_the_steps() {
    let e = error_of(&GOOD.replace("deadline = \"2h\"", "deadline = \"5m\""));
    assert_eq!(e.line, 12, "located at the step: {e}");
    assert!(
        e.message
            .contains("expect.legacy's deadline (its `deadline`, line 22), 5m"),
        "{e}"
    );
    assert!(e.hint.as_deref().unwrap().contains("later than 8m"), "{e}");
    // A `converges` expectation's run ends at `within` plus the stability
    // window when it has no `deadline`.
    let e = error_of(&GOOD.replace("within = \"10m\"", "within = \"6m\""));
    assert!(
        e.message.contains(
            "expect.sled-task's deadline (its `within` plus the stability window, line 18), 7m"
        ),
        "{e}"
    );
    // Both deadlines after the last step: the file parses.
    parse(
        "t.toml",
        &GOOD.replace("within = \"10m\"", "within = \"8m\""),
    )
    .unwrap();
}

#[test]
fn a_zero_bound_is_refused() {
    for (field, replace, with) in [
        ("within", "within = \"10m\"", "within = \"0s\""),
        ("deadline", "deadline = \"2h\"", "deadline = \"0s\""),
        (
            "settle",
            "within = \"10m\"",
            "within = \"10m\"\nsettle = \"0ms\"",
        ),
        (
            "converged_by",
            "within = \"10m\"",
            "within = \"10m\"\nconverged_by = \"0s\"",
        ),
        (
            "repair_within",
            "within = \"10m\"",
            "within = \"10m\"\nrepair_within = \"0s\"",
        ),
    ] {
        let e = refused_with(&GOOD.replace(replace, with), &format!("`{field}` is zero"));
        assert!(e.source_line.starts_with(field), "{field}: {e}");
    }
}

#[test]
fn reveal_without_hide_is_rejected() {
    let e = error_of(&GOOD.replace("action = \"hide-switch\"", "action = \"reveal-switch\""));
    assert!(e.message.contains("is not hidden"), "{e}");
}

#[test]
fn unknown_strategy_and_rack() {
    let e = error_of(&GOOD.replace("[expect.legacy]", "[expect.legacyy]"));
    assert!(e.message.contains("unknown strategy \"legacyy\""), "{e}");
    assert_eq!(e.line, 20, "{e}");
    let e = error_of(&GOOD.replace("rack = \"madrid\"", "rack = \"lisbon\""));
    assert_eq!((e.line, e.column), (3, 8), "{e}");
}

#[test]
fn unknown_host_is_named_with_the_known_ones() {
    let e = error_of(&format!(
        "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"crash\"\nhost = \"sled9\"\n"
    ));
    assert_eq!((e.line, e.column), (27, 8), "{e}");
    assert!(e.message.contains("unknown host \"sled9\""), "{e}");
    assert!(
        e.hint
            .as_deref()
            .unwrap_or("")
            .contains("sled0, sled1, sled2, switch0, switch1, upstream-ntp"),
        "{e}"
    );
}

/// The error of GOOD with one more step at 1m (`lines`: the step's other
/// lines): it mentions `message`, and is at `at` (line, column) if given.
fn step_rejected(lines: &str, at: Option<(usize, usize)>, message: &str) {
    let e = error_of(&format!("{GOOD}\n[[step]]\nat = \"1m\"\n{lines}\n"));
    if let Some(at) = at {
        assert_eq!((e.line, e.column), at, "{lines}: {e}");
    }
    assert!(e.message.contains(message), "{lines}: {e}");
}

#[test]
fn healing_a_partition_never_made_is_rejected() {
    step_rejected(
        "action = \"heal\"\na = \"sled0\"\nb = \"switch1\"",
        Some((26, 10)),
        "heal of a partition that was never made",
    );
    // The same heal after its partition is fine.
    let ok = format!(
            "{GOOD}\n[[step]]\nat = \"30s\"\naction = \"partition\"\na = \"sled0\"\nb = \"switch1\"\n\n[[step]]\nat = \"1m\"\naction = \"heal\"\na = \"sled0\"\nb = \"switch1\"\n"
        );
    assert_eq!(parse("t.toml", &ok).unwrap().plan.steps.len(), 4);
}

#[test]
fn a_field_the_action_does_not_take_is_rejected() {
    step_rejected(
        "action = \"power-off\"\nswitch = \"switch0\"",
        Some((27, 10)),
        "action \"power-off\" does not take `switch`",
    );
}

#[test]
fn a_missing_field_and_an_unknown_action_are_rejected() {
    step_rejected(
        "action = \"dpd-hang\"\nswitch = \"switch0\"",
        None,
        "action \"dpd-hang\" needs `for`",
    );
    step_rejected(
        "action = \"explode\"",
        Some((26, 10)),
        "unknown action \"explode\"",
    );
}

#[test]
fn impossible_orders_are_rejected() {
    for (step, message) in [
        ("action = \"cold-boot\"", "never powered off"),
        ("action = \"control-plane-up\"", "never took it down"),
        (
            "action = \"sidecar-power-on\"\nswitch = \"switch0\"",
            "is not off",
        ),
    ] {
        step_rejected(step, None, message);
    }
}

/// The expectation `text` gives `strategy` (it must parse).
fn expectation_of(text: &str, strategy: &str) -> Expectation {
    let s = parse("t.toml", text).unwrap();
    s.expectations[&s.strategy(strategy).unwrap()].clone()
}

/// `text`'s error stands at `(line, column)` and says `says`.
fn error_at(text: &str, at: (usize, usize), says: &str) {
    let e = error_of(text);
    assert_eq!((e.line, e.column), at, "{e}");
    assert!(e.message.contains(says), "{e}");
}

/// GOOD with these steps appended: `(at, the step's other lines)`.
fn with_steps(steps: &[(&str, &str)]) -> String {
    // Every expectation's run must outlast the steps: sled-task's 10m
    // (plus the stability window) becomes 20m, beyond any step added here.
    let mut text = GOOD.replace("within = \"10m\"", "within = \"20m\"");
    for (at, rest) in steps {
        text += &format!("\n[[step]]\nat = \"{at}\"\n{rest}\n");
    }
    text
}

/// The rack-wide step pair the ordering tests draw windows for.
const POWER_OFF: &str = "action = \"power-off\"";
const COLD_BOOT: &str = "action = \"cold-boot\"";

/// GOOD with these steps appended parses.
fn accepted(steps: &[(&str, &str)]) {
    if let Err(e) = parse("t.toml", &with_steps(steps)) {
        panic!("{e}");
    }
}

/// The error for a step that must come after another but whose window
/// can draw a time before it.
fn overlap_error(steps: &[(&str, &str)]) -> ScenarioError {
    overlapping(&with_steps(steps))
}

/// The error of `text`, in which a step's window can draw a time before
/// one it must follow.
fn overlapping(text: &str) -> ScenarioError {
    refused_with(text, "can happen before")
}

#[test]
fn a_cold_boot_whose_window_can_precede_the_power_off_is_rejected() {
    // Inside the power-off's window: sorted first, so it looks like a
    // cold boot with no power-off at all, but a power-off exists.
    let e = overlap_error(&[("10m..14m", POWER_OFF), ("12m..13m", COLD_BOOT)]);
    assert_eq!((e.line, e.column), (29, 6), "{e}");
    assert_eq!(
        e.message,
        "cold-boot at 12m..13m can happen before power-off at 10m..14m"
    );
    assert_eq!(
        e.hint.as_deref(),
        Some(
            "cold-boot's window 12m..13m can start before power-off's 10m..14m ends; \
                 make the windows not overlap"
        )
    );
    assert!(
        e.to_string()
            .starts_with("error: t.toml:29:6: cold-boot at 12m..13m"),
        "{e}"
    );
    // Ending after the power-off's window, but able to start inside it.
    let e = overlap_error(&[("10m..14m", POWER_OFF), ("12m..15m", COLD_BOOT)]);
    assert_eq!((e.line, e.column), (29, 6), "{e}");
    // A fixed time inside the window.
    let e = overlap_error(&[("10m..14m", POWER_OFF), ("13m", COLD_BOOT)]);
    assert_eq!(
        e.hint.as_deref(),
        Some("cold-boot must come after power-off in every draw; start it at 14m or later")
    );
    // Windows that touch are fine: a tie keeps plan order.
    accepted(&[("10m..12m", POWER_OFF), ("12m..13m", COLD_BOOT)]);
}

#[test]
fn same_time_steps_run_in_file_order() {
    let e = overlap_error(&[("10m", COLD_BOOT), ("10m", POWER_OFF)]);
    assert_eq!(e.line, 25, "{e}");
    assert_eq!(
        e.hint.as_deref(),
        Some(
            "both are at 10m and cold-boot is listed first, so it runs first; \
                 list the power-off step before it"
        )
    );
    accepted(&[("10m", POWER_OFF), ("10m", COLD_BOOT)]);
}

#[test]
fn a_reveal_whose_window_can_precede_the_hide_is_rejected() {
    let e = error_of(&GOOD.replace("at = \"0s\"", "at = \"4m..6m\""));
    assert_eq!((e.line, e.column), (12, 6), "{e}");
    assert_eq!(
        e.message,
        "reveal-switch at 5m..8m can happen before hide-switch at 4m..6m"
    );
}

#[test]
fn a_heal_whose_window_can_precede_the_partition_is_rejected() {
    let partition = "action = \"partition\"\na = \"sled0\"\nb = \"switch1\"";
    let heal = "action = \"heal\"\na = \"sled0\"\nb = \"switch1\"";
    for (p, h, first) in [("1m..3m", "2m..4m", "heal"), ("1m..5m", "2m..4m", "heal")] {
        let e = overlap_error(&[(p, partition), (h, heal)]);
        assert!(e.message.starts_with(first), "{e}");
        assert_eq!(e.line, 31, "{e}");
    }
    // A partition with other groups does not make the heal possible.
    let e = error_of(&with_steps(&[
        (
            "1m",
            "action = \"partition\"\na = \"sled1\"\nb = \"switch1\"",
        ),
        ("2m", heal),
    ]));
    assert!(e.message.contains("never made"), "{e}");
    accepted(&[("1m..2m", partition), ("2m..4m", heal)]);
}

#[test]
fn sidecar_steps_whose_windows_overlap_are_rejected() {
    let off = "action = \"sidecar-power-off\"\nswitch = \"switch0\"";
    let on = "action = \"sidecar-power-on\"\nswitch = \"switch0\"";
    // The power-on can come before the power-off.
    let e = overlap_error(&[("10m..14m", off), ("12m..13m", on)]);
    assert_eq!(
        e.message,
        "sidecar-power-on at 12m..13m can happen before sidecar-power-off at 10m..14m"
    );
    // A second power-off can come before the power-on that precedes it.
    let e = overlap_error(&[("10m", off), ("12m..14m", on), ("13m..15m", off)]);
    assert_eq!(
        e.message,
        "sidecar-power-off at 13m..15m can happen before sidecar-power-on at 12m..14m"
    );
    accepted(&[("10m", off), ("12m..14m", on), ("14m..15m", off)]);
}

#[test]
fn a_control_plane_up_that_can_precede_its_down_is_rejected() {
    let e = overlap_error(&[
        ("12m..14m", "action = \"control-plane-down\""),
        ("13m", "action = \"control-plane-up\""),
    ]);
    assert_eq!(
        e.message,
        "control-plane-up at 13m can happen before control-plane-down at 12m..14m"
    );
    let e = overlap_error(&[
        ("3m..3m150ms", "action = \"control-plane-crash\""),
        ("3m100ms", "action = \"control-plane-up\""),
    ]);
    assert!(e.message.starts_with("control-plane-up at 3m0.1s"), "{e}");
}

/// An instance scenario: one create (the plan the integration tests'
/// `NO_RACE` runs too), expected to converge under saga.
const INSTANCES: &str = concat!(
    r#"name = "i"
description = "d"
"#,
    include_str!("../../../racksim/tests/common/one-create.toml"),
    r#"
[expect.saga]
outcome = "converges"
within = "5m"
"#
);

#[test]
fn instance_scenarios_parse_with_start_implementations() {
    let s = parse("i.toml", INSTANCES).unwrap();
    assert_eq!(s.kind, Kind::Instances);
    assert_eq!(
        s.strategy("saga").unwrap(),
        Strategy::start(StartImpl::Saga)
    );
    assert!(
        s.strategy("sled-task").is_err(),
        "NAT strategies are not start implementations"
    );
    assert_eq!(
        s.plan.steps[0].action,
        Action::InstanceCreate {
            instance: "web1".into(),
            sled: "sled2".into()
        }
    );
}

#[test]
fn unknown_instances_and_sleds_are_rejected() {
    let e = error_of(&INSTANCES.replace("instance = \"web1\"", "instance = \"web2\""));
    assert_eq!((e.line, e.column), (13, 12), "{e}");
    assert_eq!(e.hint.as_deref(), Some("declared instances: web1"));
    error_at(
        &INSTANCES.replace("sled = \"sled2\"", "sled = \"sled9\""),
        (14, 8),
        "unknown sled \"sled9\"",
    );
    // Instances belong to instance scenarios only.
    let e = error_of(&INSTANCES.replace("kind = \"instances\"\n", ""));
    assert!(e.message.contains("only in kind = \"instances\""), "{e}");
}

#[test]
fn violates_needs_a_known_invariant() {
    let e = error_of(&INSTANCES.replace(
        "outcome = \"converges\"\nwithin = \"5m\"",
        "outcome = \"violates\"\ndeadline = \"5m\"",
    ));
    assert!(e.message.contains("needs an `invariant`"), "{e}");
    let e = error_of(&INSTANCES.replace(
        "outcome = \"converges\"\nwithin = \"5m\"",
        "outcome = \"violates\"\ninvariant = \"two-vmms\"\ndeadline = \"5m\"",
    ));
    assert!(e.message.contains("unknown invariant \"two-vmms\""), "{e}");
}

#[test]
fn error_display_shows_line_and_caret() {
    let e = error_of(&GOOD.replace("at = \"0s\"", "at = \"soon\""));
    let shown = e.to_string();
    assert!(shown.starts_with("error: t.toml:7:6: "), "{shown}");
    assert!(shown.contains("7 | at = \"soon\"\n  |      ^"), "{shown}");
}

/// A scenario on a rack declared in its file (the writer's tests write it
/// back).
pub(crate) const DECLARED: &str = r#"name = "t"
description = "d"
ntp_return_switch = "switch0"

[rack]
name = "small"
sleds = 4
scrimlets = { switch0 = "sled0", switch1 = "sled1" }
uplinked = ["switch0"]
internal_dns = ["sled2", "sled3"]

[[rack.zone]]
kind = "boundary-ntp"
sled = "sled2"
external_ip = "198.51.100.1"
first_port = 0
last_port = 16383

[[rack.zone]]
kind = "boundary-ntp"
sled = "sled3"
external_ip = "198.51.100.1"
first_port = 16384
last_port = 32767

[[rack.zone]]
kind = "nexus"
sled = "sled3"
external_ip = "198.51.100.2"

[[rack.zone]]
kind = "external-dns"
sled = "sled2"
external_ip = "198.51.100.3"

[expect.sled-task]
outcome = "converges"
within = "10m"
"#;

#[test]
fn a_declared_rack_parses() {
    let s = parse("t.toml", DECLARED).unwrap();
    let rack = &s.rack;
    assert_eq!(s.rack_name, "small");
    assert_eq!(rack.sleds.len(), 4);
    assert_eq!(rack.internal_dns, vec![2, 3]);
    assert_eq!(rack.uplinked_switches(), vec![SwitchSlot::Switch0]);
    assert_eq!(rack.zones.len(), 4);
    assert_eq!(
        (rack.zones[1].first_port, rack.zones[1].last_port),
        (16384, 32767)
    );
    assert_eq!(
        (rack.zones[2].first_port, rack.zones[2].last_port),
        (0, 65535)
    );
    // The same rack named by its list of sleds.
    let listed = DECLARED.replace(
        "sleds = 4",
        "sleds = [\"sled0\", \"sled1\", \"sled2\", \"sled3\"]",
    );
    assert_eq!(parse("t.toml", &listed).unwrap().rack, s.rack);
}

#[test]
fn the_full_preset_parses_by_name() {
    let s = parse(
        "t.toml",
        &GOOD.replace("rack = \"madrid\"", "rack = \"full\""),
    )
    .unwrap();
    assert_eq!(s.rack.sleds.len(), 32);
    assert_eq!(s.rack_name, "full");
}

/// Each bad rack is rejected at the offending value with a hint.
#[test]
fn bad_racks_are_located() {
    let cases: &[(&str, &str, &str, &str)] = &[
        // (replace, with, message fragment, text at the error's column)
        (
            "sled = \"sled3\"\nexternal_ip = \"198.51.100.2\"",
            "sled = \"sled9\"\nexternal_ip = \"198.51.100.2\"",
            "unknown sled \"sled9\"",
            "\"sled9\"",
        ),
        (
            "switch1 = \"sled1\" }",
            "switch1 = \"sled0\" }",
            "cabled to both switches",
            "\"sled0\"",
        ),
        (
            "scrimlets = { switch0 = \"sled0\", switch1 = \"sled1\" }",
            "scrimlets = { switch0 = \"sled0\" }",
            "exactly 2 scrimlets",
            "{ switch0",
        ),
        (
            "first_port = 16384",
            "first_port = 8192",
            "not an aligned chunk",
            "8192",
        ),
        (
            "external_ip = \"198.51.100.2\"",
            "external_ip = \"198.51.100.1\"",
            "overlaps zone boundary-ntp",
            "\"198.51.100.1\"\n\n[expect",
        ),
        (
            "kind = \"nexus\"",
            "kind = \"nexxus\"",
            "unknown zone kind",
            "\"nexxus\"",
        ),
        (
            "internal_dns = [\"sled2\", \"sled3\"]",
            "internal_dns = []",
            "no internal DNS server",
            "[]",
        ),
        (
            "uplinked = [\"switch0\"]",
            "uplinked = []",
            "no switch is uplinked",
            "[]",
        ),
        (
            "sled = \"sled3\"\nexternal_ip = \"198.51.100.1\"",
            "sled = \"sled2\"\nexternal_ip = \"198.51.100.1\"",
            "two boundary-ntp zones on sled2",
            "\"sled2\"",
        ),
        ("sleds = 4", "sleds = 40", "1 to 32 sleds", "40"),
        (
            "sleds = 4",
            "sleds = [\"sled0\", \"sled1\", \"b\", \"sled2\"]",
            "is at position 3",
            "[\"sled0\"",
        ),
        (
            "external_ip = \"198.51.100.2\"",
            "external_ip = \"198.51.100\"",
            "invalid IPv4 address",
            "\"198.51.100\"",
        ),
    ];
    for (from, to, message, at) in cases {
        assert!(DECLARED.contains(from), "{from}");
        let text = DECLARED.replacen(from, to, 1);
        let e = parse("t.toml", &text).expect_err(message);
        assert!(e.message.contains(message), "{message}: {e}");
        let line = text.lines().nth(e.line - 1).unwrap();
        let rest: String = line.chars().skip(e.column - 1).collect();
        let at_first_line = at.lines().next().unwrap();
        assert!(
            rest.starts_with(at_first_line),
            "{message}: points at {rest:?}\n{e}"
        );
        assert!(e.hint.is_some() || !message.contains("unknown"), "{e}");
    }
    // A rack without a Nexus zone.
    let no_nexus = DECLARED.replace(
        "[[rack.zone]]\nkind = \"nexus\"\nsled = \"sled3\"\nexternal_ip = \"198.51.100.2\"\n",
        "",
    );
    let e = parse("t.toml", &no_nexus).expect_err("no nexus");
    assert!(e.message.contains("no nexus zone"), "{e}");
    assert!(e.hint.as_deref().unwrap().contains("[[rack.zone]]"), "{e}");
    // An unknown field in the table is a located error too.
    let e = parse(
        "t.toml",
        &DECLARED.replace("name = \"small\"", "nmae = \"small\""),
    )
    .unwrap_err();
    assert!(e.message.contains("unknown field"), "{e}");
    assert_eq!(e.line, 6);
}

/// No vacuous cells: `any` must come with something that can fail, and
/// timing bounds only apply to outcomes that converge.
#[test]
fn vacuous_and_misplaced_expectations_are_rejected() {
    let any = GOOD.replace(
        "outcome = \"fails\"\ndeadline = \"2h\"",
        "outcome = \"any\"\ndeadline = \"2h\"",
    );
    let e = refused_with(&any, "needs `some_seeds_violate` or `some_seeds_fail`");
    assert!(e.hint.as_deref().unwrap().contains("could fail"), "{e}");
    // A reason to fail alone is vacuous too: every run may converge.
    let with_mentions = any.replace(
        "deadline = \"2h\"",
        "deadline = \"2h\"\nverdict_mentions = [\"switch1\"]",
    );
    let e = error_of(&with_mentions);
    assert!(e.message.contains("needs `some_seeds_violate`"), "{e}");
    // ... unless some seed must fail for it.
    let must_fail = with_mentions.replace(
        "verdict_mentions = [\"switch1\"]",
        "verdict_mentions = [\"switch1\"]\nsome_seeds_fail = true",
    );
    let exp = expectation_of(&must_fail, "legacy");
    assert!(exp.some_seeds_fail);
    assert_eq!(exp.verdict_mentions, ["switch1"]);

    let misplaced = good_with(
        "outcome = \"fails\"\ndeadline = \"2h\"",
        "repair_within = \"5s\"",
    );
    let e = error_of(&misplaced);
    assert!(e.message.contains("`repair_within` only applies"), "{e}");
    assert_eq!(e.line, 23);

    let bounds = good_with(
        "within = \"10m\"",
        "converged_by = \"1m\"\nrepair_within = \"5s\"",
    );
    let exp = expectation_of(&bounds, "sled-task");
    assert_eq!(exp.converged_by, Some(Duration::from_secs(60)));
    assert_eq!(exp.repair_within, Some(Duration::from_secs(5)));
}

/// INSTANCES with its `[expect.saga]` table's body replaced by `body`.
fn saga_expect(body: &str) -> String {
    let table = "outcome = \"converges\"\nwithin = \"5m\"\n";
    assert!(INSTANCES.contains(table));
    INSTANCES.replace(table, body)
}

/// The error points at `at` in `text` (its line and column).
fn assert_points_at(text: &str, e: &ScenarioError, at: &str) {
    let line = text.lines().nth(e.line - 1).expect("the line exists");
    let rest: String = line.chars().skip(e.column - 1).collect();
    assert!(rest.starts_with(at), "points at {rest:?}, not {at:?}\n{e}");
}

/// `invariant` and `some_seeds_violate` name invariants that exist (sim's
/// one list), else a located error lists them.
#[test]
fn unknown_invariant_names_are_located_and_listed() {
    let cases = [
        (
            "outcome = \"any\"\ndeadline = \"5m\"\nsome_seeds_violate = \"two-vmms\"\n",
            "unknown invariant \"two-vmms\"",
            "\"two-vmms\"",
        ),
        (
            "outcome = \"any\"\ndeadline = \"5m\"\nsome_seeds_violate = [\"one-vmm\", \"two-vmms\"]\n",
            "unknown invariant \"two-vmms\"",
            "\"two-vmms\"",
        ),
        (
            "outcome = \"violates\"\ninvariant = \"one_vmm\"\ndeadline = \"5m\"\n",
            "unknown invariant \"one_vmm\"",
            "\"one_vmm\"",
        ),
        (
            "outcome = \"any\"\ndeadline = \"5m\"\nsome_seeds_violate = []\n",
            "lists no invariant",
            "[]",
        ),
    ];
    for (body, message, at) in cases {
        let text = saga_expect(body);
        let e = error_of(&text);
        assert!(e.message.contains(message), "{body}: {e}");
        assert_points_at(&text, &e, at);
        let hint = e.hint.as_deref().expect("a hint");
        for inv in racksim_sim::check::INVARIANTS {
            assert!(hint.contains(inv), "{body}: the hint lists {inv}: {e}");
        }
    }
    let text = saga_expect(
        "outcome = \"any\"\ndeadline = \"5m\"\nsome_seeds_violate = [\"one-vmm\", \"one-vmm\"]\n",
    );
    let e = error_of(&text);
    assert!(e.message.contains("names one-vmm twice"), "{e}");

    // Every listed name parses, one or many.
    for inv in racksim_sim::check::INVARIANTS {
        let s = parse(
            "i.toml",
            &saga_expect(&format!(
                "outcome = \"any\"\ndeadline = \"5m\"\nsome_seeds_violate = \"{inv}\"\n"
            )),
        )
        .unwrap();
        assert_eq!(
            s.expectations[&s.strategy("saga").unwrap()].some_seeds_violate,
            [inv]
        );
    }
    let s = parse(
        "i.toml",
        &saga_expect(
            "outcome = \"any\"\ndeadline = \"5m\"\nsome_seeds_violate = [\"one-vmm\", \"nat-follows-vmm\"]\n",
        ),
    )
    .unwrap();
    assert_eq!(
        s.expectations[&s.strategy("saga").unwrap()].some_seeds_violate,
        ["one-vmm", "nat-follows-vmm"]
    );
}

/// Every field an outcome would not judge, or that no run could fail, is
/// refused at the value that wrote it, with a hint.
#[test]
fn fields_an_outcome_does_not_judge_are_refused_where_written() {
    let converges = "outcome = \"converges\"\nwithin = \"5m\"\n";
    let fails = "outcome = \"fails\"\ndeadline = \"5m\"\n";
    let violates = "outcome = \"violates\"\ninvariant = \"one-vmm\"\ndeadline = \"5m\"\n";
    let any = "outcome = \"any\"\ndeadline = \"5m\"\nsome_seeds_violate = \"one-vmm\"\n";
    let cases: &[(&str, &str, &str, &str)] = &[
        // (table, added field, message, where it points)
        (
            converges,
            "verdict_mentions = [\"web1\"]",
            "never judged for outcome \"converges\"",
            "[\"web1\"]",
        ),
        (
            converges,
            "verdict_mentions_any = [\"web1\"]",
            "never judged for outcome \"converges\"",
            "[\"web1\"]",
        ),
        (
            converges,
            "some_seeds_violate = \"one-vmm\"",
            "only applies to outcome \"any\"",
            "\"one-vmm\"",
        ),
        (
            converges,
            "some_seeds_fail = true",
            "only applies to outcome \"any\"",
            "true",
        ),
        (
            converges,
            "invariant = \"one-vmm\"",
            "only applies to outcome \"violates\"",
            "\"one-vmm\"",
        ),
        (converges, "deadline = \"4m\"", "before `within`", "\"4m\""),
        (converges, "settle = \"5m\"", "not below `within`", "\"5m\""),
        (
            converges,
            "converged_by = \"6m\"",
            "not below `within`",
            "\"6m\"",
        ),
        (
            fails,
            "within = \"5m\"",
            "only applies to outcome \"converges\"",
            "\"5m\"",
        ),
        (
            fails,
            "settle = \"1m\"",
            "only applies to outcome \"converges\"",
            "\"1m\"",
        ),
        (
            fails,
            "converged_by = \"1m\"",
            "only applies to outcome \"converges\"",
            "\"1m\"",
        ),
        (
            fails,
            "some_seeds_violate = \"one-vmm\"",
            "only applies to outcome \"any\"",
            "\"one-vmm\"",
        ),
        (
            fails,
            "some_seeds_fail = true",
            "only applies to outcome \"any\"",
            "true",
        ),
        (
            fails,
            "invariant = \"one-vmm\"",
            "only applies to outcome \"violates\"",
            "\"one-vmm\"",
        ),
        (
            fails,
            "verdict_mentions = [\"web1\", \" \"]",
            "empty text",
            "\" \"",
        ),
        (fails, "verdict_mentions_any = []", "lists no text", "[]"),
        (
            violates,
            "within = \"5m\"",
            "only applies to outcome \"converges\"",
            "\"5m\"",
        ),
        (
            violates,
            "repair_within = \"1m\"",
            "only applies to outcome \"converges\"",
            "\"1m\"",
        ),
        (
            violates,
            "some_seeds_violate = \"one-vmm\"",
            "only applies to outcome \"any\"",
            "\"one-vmm\"",
        ),
        (
            any,
            "within = \"5m\"",
            "only applies to outcome \"converges\"",
            "\"5m\"",
        ),
        (
            any,
            "settle = \"1m\"",
            "only applies to outcome \"converges\"",
            "\"1m\"",
        ),
        (
            any,
            "invariant = \"one-vmm\"",
            "only applies to outcome \"violates\"",
            "\"one-vmm\"",
        ),
        (
            any,
            "some_seeds_fail = true",
            "needs `verdict_mentions` or `verdict_mentions_any`",
            "true",
        ),
    ];
    for (table, field, message, at) in cases {
        let text = saga_expect(&format!("{table}{field}\n"));
        let e = error_of(&text);
        assert!(e.message.contains(message), "{field} under {table:?}: {e}");
        assert!(
            e.message.contains("expect.saga"),
            "{field}: names the table: {e}"
        );
        assert_points_at(&text, &e, at);
        assert!(e.hint.is_some(), "{field} under {table:?}: a hint: {e}");
    }
    // Each table alone parses, and so does each field where it is judged.
    for table in [converges, fails, violates, any] {
        parse("i.toml", &saga_expect(table)).unwrap_or_else(|e| panic!("{table}: {e}"));
    }
    for (table, field) in [
        (converges, "settle = \"4m\""),
        (converges, "converged_by = \"4m\""),
        (converges, "deadline = \"5m\""),
        (
            fails,
            "verdict_mentions = [\"web1\"]\nverdict_mentions_any = [\"sled1\", \"sled2\"]",
        ),
        (violates, "verdict_mentions = [\"web1\"]"),
        (
            any,
            "verdict_mentions_any = [\"sled1\", \"sled2\"]\nsome_seeds_fail = true",
        ),
    ] {
        parse("i.toml", &saga_expect(&format!("{table}{field}\n")))
            .unwrap_or_else(|e| panic!("{field} under {table:?}: {e}"));
    }
}

/// Zone start time is measured where a zone start does NAT work (legacy);
/// under the other strategies every start takes 0s, so a bound on it is
/// refused with what to assert instead.
#[test]
fn zone_start_bounds_apply_only_where_zone_starts_do_work() {
    let sled_task = good_with("within = \"10m\"", "zone_start_at_most = \"5s\"");
    let scrimlet_local = format!(
        "{GOOD}\n[expect.scrimlet-local]\noutcome = \"converges\"\nwithin = \"10m\"\nzone_start_at_least = \"5m\"\n"
    );
    for (strategy, text, value) in [
        ("sled-task", sled_task, "\"5s\""),
        ("scrimlet-local", scrimlet_local, "\"5m\""),
    ] {
        let e = error_of(&text);
        assert!(
            e.message.contains(&format!("cannot fail under {strategy}")),
            "{strategy}: {e}"
        );
        assert_points_at(&text, &e, value);
        let hint = e.hint.as_deref().unwrap();
        assert!(
            hint.contains("converged_by") && hint.contains("repair_within"),
            "{e}"
        );
    }
    // Under legacy they parse.
    let legacy = good_with(
        "deadline = \"2h\"",
        "zone_start_at_least = \"5m\"\nzone_start_at_most = \"6m\"",
    );
    let exp = expectation_of(&legacy, "legacy");
    assert_eq!(exp.zone_start_at_least, Some(Duration::from_secs(300)));
    assert_eq!(exp.zone_start_at_most, Some(Duration::from_secs(360)));
    // A bound every start meets is refused there too.
    let e = error_of(&good_with(
        "deadline = \"2h\"",
        "zone_start_at_least = \"0s\"",
    ));
    assert!(e.message.contains("always holds"), "{e}");
    // An instances scenario's zone starts are its service-NAT strategy's.
    let with_bound =
        saga_expect("outcome = \"converges\"\nwithin = \"5m\"\nzone_start_at_most = \"5s\"\n");
    let e = error_of(&with_bound);
    assert!(
        e.message.contains("under service_nat = \"sled-task\""),
        "{e}"
    );
    let legacy_nat = with_bound.replace(
        "kind = \"instances\"\n",
        "kind = \"instances\"\nservice_nat = \"legacy\"\n",
    );
    parse("i.toml", &legacy_nat).unwrap();
    // Today's shipped code keeps the blocking zone start, so the bounds are
    // judged there too, in a service-NAT table and as an instances file's
    // service NAT.
    let shipped = format!(
        "{GOOD}\n[expect.scrimlet-local-with-zone-start]\noutcome = \"converges\"\nwithin = \"10m\"\nzone_start_at_least = \"5m\"\n"
    );
    let s = parse("t.toml", &shipped).unwrap();
    let exp = &s.expectations[&Strategy::nat(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START)];
    assert_eq!(exp.zone_start_at_least, Some(Duration::from_secs(300)));
    parse(
        "i.toml",
        &with_bound.replace(
            "kind = \"instances\"\n",
            "kind = \"instances\"\nservice_nat = \"scrimlet-local-with-zone-start\"\n",
        ),
    )
    .unwrap();
}

/// `[expect.scrimlet-local-with-zone-start]` names the shipped strategy, and
/// a near miss is refused with every strategy's name in the message.
#[test]
fn the_shipped_strategy_has_an_expectation_table_of_its_own() {
    let text = format!(
        "{GOOD}\n[expect.scrimlet-local-with-zone-start]\noutcome = \"fails\"\ndeadline = \"1h\"\n"
    );
    let s = parse("t.toml", &text).unwrap();
    assert_eq!(
        s.strategy("scrimlet-local-with-zone-start").unwrap(),
        Strategy::nat(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START)
    );
    let exp = &s.expectations[&Strategy::nat(ServiceNat::SCRIMLET_LOCAL_WITH_ZONE_START)];
    assert_eq!(exp.deadline, Duration::from_secs(3600));
    // It is a table of its own, not scrimlet-local's.
    assert!(!s
        .expectations
        .contains_key(&Strategy::nat(ServiceNat::SCRIMLET_LOCAL)));
    let typo = text.replace(
        "[expect.scrimlet-local-with-zone-start]",
        "[expect.scrimlet-local-with-zonestart]",
    );
    let e = error_of(&typo);
    assert!(
        e.message.contains("unknown strategy")
            && e.message
                .contains("scrimlet-local, scrimlet-local-with-zone-start"),
        "{e}"
    );
    assert_points_at(&typo, &e, "scrimlet-local-with-zonestart");
}

/// A config-change step on the standard rack (sled2: boundary NTP; sled3:
/// Nexus and external DNS).
fn config_steps(steps: &[(&str, &str)]) -> String {
    let mut text = GOOD.replace("rack = \"madrid\"", "rack = \"standard\"");
    for (at, rest) in steps {
        text += &format!("\n[[step]]\nat = \"{at}\"\naction = \"config-change\"\n{rest}\n");
    }
    text
}

/// A config-change step's lines: remove `zone`.
fn remove_zone(zone: &str) -> String {
    format!("change = \"remove-zone\"\nzone = \"{zone}\"")
}

/// A config-change step's lines: a second Nexus zone, on sled2.
const ADD_NEXUS: &str = "change = \"add-zone\"\nzone = \"nexus\"\nsled = \"sled2\"";

#[test]
fn config_changes_parse_and_refer_to_zones_by_kind_and_ordinal() {
    let text = config_steps(&[
        ("1m", ADD_NEXUS),
        ("2m", "change = \"move-zone\"\nzone = \"nexus.1\"\nsled = \"sled0\""),
        ("3m", &remove_zone("nexus.0")),
        // Only nexus.1 is left: `nexus` names it.
        ("4m", "change = \"move-zone\"\nzone = \"nexus\"\nsled = \"sled3\""),
        (
            "5m",
            "change = \"add-zone\"\nzone = \"external-dns\"\nsled = \"sled1\"\nexternal_ip = \"198.51.100.9\"",
        ),
    ]);
    let s = parse("t.toml", &text).unwrap();
    let changes: Vec<String> = s
        .plan
        .steps
        .iter()
        .filter(|st| st.action.kind() == "config-change")
        .map(|st| st.action.to_string())
        .collect();
    assert_eq!(
        changes,
        [
            "config change: add zone nexus on sled2",
            "config change: move zone nexus.1 to sled0",
            "config change: remove zone nexus.0",
            "config change: move zone nexus to sled3",
            "config change: add zone external-dns on sled1 at 198.51.100.9",
        ]
    );
}

#[test]
fn bad_config_changes_get_located_errors() {
    // An ambiguous kind once there are two Nexus zones.
    let e = error_of(&config_steps(&[
        ("1m", ADD_NEXUS),
        ("2m", &remove_zone("nexus")),
    ]));
    assert!(e.message.contains("nexus is ambiguous"), "{e}");
    assert!(e.message.contains("nexus.0, nexus.1"), "{e}");
    assert!(e.source_line.contains("zone = \"nexus\""), "{e}");

    for (step, message) in [
        ("change = \"remove-zone\"\nzone = \"nexus.3\"", "no zone nexus.3"),
        ("change = \"remove-zone\"\nzone = \"ntp\"", "unknown zone kind \"ntp\""),
        ("change = \"remove-zone\"\nzone = \"nexus.x\"", "not a zone ordinal"),
        ("change = \"add-zone\"\nzone = \"nexus\"\nsled = \"sled9\"", "unknown sled \"sled9\""),
        ("change = \"add-zone\"\nzone = \"nexus\"", "needs `sled`"),
        ("change = \"move-zone\"\nzone = \"nexus\"\nsled = \"sled3\"", "already on that sled"),
        ("change = \"remove-zone\"\nzone = \"nexus\"\nsled = \"sled3\"", "does not take `sled`"),
        (
            "change = \"move-zone\"\nzone = \"nexus\"\nsled = \"sled2\"\nexternal_ip = \"198.51.100.9\"",
            "does not take `external_ip`",
        ),
        (
            "change = \"add-zone\"\nzone = \"nexus\"\nsled = \"sled2\"\nexternal_ip = \"nine\"",
            "invalid IPv4 address",
        ),
        ("change = \"rename-zone\"\nzone = \"nexus\"", "unknown config change"),
        ("zone = \"nexus\"", "needs `change`"),
    ] {
        let e = error_of(&config_steps(&[("1m", step)]));
        assert!(e.message.contains(message), "{step}: {e}");
        assert!(e.line > 20, "{step}: located in the step: {e}");
    }
}

/// Removing the last zone of a kind is allowed in a file (it exercises the
/// run's refusal), and since the run refuses it, later steps still see the
/// zone.
#[test]
fn a_refused_config_change_leaves_the_zones_later_steps_see() {
    let text = config_steps(&[
        ("1m", &remove_zone("nexus")),
        (
            "2m",
            "change = \"move-zone\"\nzone = \"nexus\"\nsled = \"sled2\"",
        ),
    ]);
    assert_eq!(parse("t.toml", &text).unwrap().plan.steps.len(), 4);
    // A valid removal does change them.
    let e = error_of(&config_steps(&[
        ("1m", ADD_NEXUS),
        ("2m", &remove_zone("nexus.0")),
        (
            "3m",
            "change = \"move-zone\"\nzone = \"nexus.0\"\nsled = \"sled2\"",
        ),
    ]));
    assert!(e.message.contains("no zone nexus.0"), "{e}");
}

#[test]
fn config_changes_whose_windows_overlap_are_rejected() {
    overlapping(&config_steps(&[
        ("1m..3m", ADD_NEXUS),
        ("2m", &remove_zone("nexus.1")),
    ]));
}

/// `operations` takes "succeed" and nothing else, `operations_within` a
/// duration; both only where the plan can make instance API requests.
#[test]
fn operation_requirements_parse_and_refuse_what_cannot_fail() {
    let ok = saga_expect(
        "outcome = \"converges\"\nwithin = \"5m\"\noperations = \"succeed\"\n\
         operations_within = \"3s\"\n",
    );
    let exp = expectation_of(&ok, "saga");
    assert!(exp.operations_succeed);
    assert_eq!(exp.operations_within, Some(Duration::from_secs(3)));
    assert!(
        exp.summary().ends_with(", operations succeed"),
        "{}",
        exp.summary()
    );

    let maybe = saga_expect("outcome = \"converges\"\nwithin = \"5m\"\noperations = \"maybe\"\n");
    let e = refused_with(&maybe, "unknown `operations` requirement \"maybe\"");
    assert_points_at(&maybe, &e, "\"maybe\"");

    let service_nat = good_with("within = \"10m\"", "operations_within = \"1s\"");
    refused_with(
        &service_nat,
        "`operations_within` cannot fail in a service-nat scenario",
    );
}

/// An expectation key names a preset with mechanisms in other eras; a
/// choice that is unknown, or that no run of the scenario could tell from
/// its preset, is refused at the key.
#[test]
fn expectation_keys_name_variants_with_era_choices() {
    let text = format!(
        "{INSTANCES}\n[expect.\"saga+nat-ensure=matches-removed\"]\noutcome = \"fails\"\ndeadline = \"10m\"\n"
    );
    let s = parse("i.toml", &text).unwrap();
    let v = s.strategy("saga+nat-ensure=matches-removed").unwrap();
    assert_eq!(v.preset, Preset::Start(StartImpl::Saga));
    assert_eq!(
        v.eras.nat_ensure,
        Some(racksim_nexus::instances::NatEnsure::MatchesRemoved)
    );
    assert_eq!(v.to_string(), "saga+nat-ensure=matches-removed");
    assert!(s.expectations.contains_key(&v));
    assert!(s
        .expectations
        .contains_key(&Strategy::start(StartImpl::Saga)));
    assert_eq!(
        v.control_plane(s.service_nat).nat_ensure,
        racksim_nexus::instances::NatEnsure::MatchesRemoved
    );

    for (key, says) in [
        (
            "saga+nat-ensure=sometimes",
            "unknown era \"sometimes\" of nat-ensure",
        ),
        ("saga+dpd-notify=logged", "already that era"),
        ("inline+dpd-notify=fatal", "inline pushes NAT itself"),
        ("saga+frobnicate=on", "unknown mechanism \"frobnicate\""),
    ] {
        let bad =
            format!("{INSTANCES}\n[expect.\"{key}\"]\noutcome = \"fails\"\ndeadline = \"10m\"\n");
        let e = error_of(&bad);
        assert!(e.message.contains(says), "{key}: {e}");
        assert_points_at(&bad, &e, &format!("\"{key}\""));
    }
    // An instance mechanism in a service-NAT scenario changes nothing.
    let service_nat = format!(
        "{GOOD}\n[expect.\"sled-task+nat-ensure=matches-removed\"]\noutcome = \"converges\"\nwithin = \"10m\"\n"
    );
    let e = error_of(&service_nat);
    assert!(e.message.contains("need a run with instances"), "{e}");
}

/// `operations = "some-fail"` takes `failed_operations_mention`; the
/// mentions alone, or empty, are refused.
#[test]
fn some_failed_operations_parse_and_their_mentions_need_them() {
    let ok = saga_expect(
        "outcome = \"converges\"\nwithin = \"5m\"\noperations = \"some-fail\"\n\
         failed_operations_mention = [\"start instance web1\"]\n",
    );
    let exp = expectation_of(&ok, "saga");
    assert!(exp.operations_some_fail && !exp.operations_succeed);
    assert_eq!(exp.failed_operations_mention, vec!["start instance web1"]);
    assert!(
        exp.summary().ends_with(", some operation fails"),
        "{}",
        exp.summary()
    );

    let alone = saga_expect(
        "outcome = \"converges\"\nwithin = \"5m\"\nfailed_operations_mention = [\"x\"]\n",
    );
    refused_with(&alone, "judged only with operations = \"some-fail\"");
    let empty = saga_expect(
        "outcome = \"converges\"\nwithin = \"5m\"\noperations = \"some-fail\"\n\
         failed_operations_mention = []\n",
    );
    let e = error_of(&empty);
    assert!(e.message.contains("needs texts"), "{e}");
}

/// `reboot-scrimlet` and `scrimlet-back` pair up like a sidecar's power:
/// a return with no reboot before it, or a second reboot before the
/// return, is refused; their windows must not let the return come first.
#[test]
fn a_scrimlet_reboot_pairs_with_its_return() {
    const REBOOT: &str = "action = \"reboot-scrimlet\"\nswitch = \"switch1\"";
    const BACK: &str = "action = \"scrimlet-back\"\nswitch = \"switch1\"";
    accepted(&[("10m", REBOOT), ("12m..13m", BACK)]);
    let s = parse("t.toml", &with_steps(&[("10m", REBOOT), ("12m", BACK)])).unwrap();
    let actions: Vec<&Action> = s.plan.steps.iter().map(|st| &st.action).collect();
    assert!(actions.contains(&&Action::ScrimletReboot(SwitchSlot::Switch1)));
    assert!(actions.contains(&&Action::ScrimletBack(SwitchSlot::Switch1)));

    let e = error_of(&with_steps(&[("12m", BACK)]));
    assert!(
        e.message.contains("switch1's scrimlet is not rebooting"),
        "{e}"
    );
    let e = error_of(&with_steps(&[("10m", REBOOT), ("11m", REBOOT)]));
    assert!(e.message.contains("already rebooting"), "{e}");
    overlap_error(&[("10m..12m", REBOOT), ("11m", BACK)]);
}

/// INSTANCES with `line` among its root keys (before the tables).
fn instances_with(line: &str) -> String {
    INSTANCES.replacen(
        "kind = \"instances\"\n",
        &format!("kind = \"instances\"\n{line}\n"),
        1,
    )
}

#[test]
fn an_ip_pool_parses_and_is_written_back() {
    let text = instances_with(r#"ip_pool = "203.0.113.20-203.0.113.21""#);
    let s = parse("i.toml", &text).unwrap();
    let pool = s.ip_pool.expect("the pool is set");
    assert_eq!(pool.to_string(), "203.0.113.20-203.0.113.21");
    assert_eq!(pool.len(), 2);
    // One address alone is a pool of one.
    let one = parse("i.toml", &instances_with(r#"ip_pool = "203.0.113.20""#)).unwrap();
    assert_eq!(one.ip_pool.unwrap().len(), 1);
    // Without it, no pool: the fixed addresses of before.
    assert!(parse("i.toml", INSTANCES).unwrap().ip_pool.is_none());
    // The writer keeps it (shrunk and fuzzed files round-trip).
    let written = super::write::scenario_toml(&s, &[]);
    assert!(
        written.contains("ip_pool = \"203.0.113.20-203.0.113.21\""),
        "{written}"
    );
    assert_eq!(parse("w.toml", &written).unwrap().ip_pool, s.ip_pool);
}

#[test]
fn bad_ip_pools_are_located_and_change_nothing() {
    for (value, says) in [
        (
            "203.0.113.21-203.0.113.20",
            "ends (203.0.113.20) before it starts",
        ),
        (
            "203.0.113.300-203.0.113.301",
            "\"203.0.113.300\" is not an IPv4 address",
        ),
        ("fd00::1-fd00::2", "is not an IPv4 address"),
        ("", "\"\" is not an IPv4 address"),
        // Madrid's Nexus zone has 198.51.100.2: an instance may not take it.
        ("198.51.100.1-198.51.100.9", "the external IP of"),
    ] {
        let text = instances_with(&format!("ip_pool = {value:?}"));
        let e = error_of(&text);
        // Line 4 (after name, description, kind), at the value's quote.
        assert_eq!((e.line, e.column), (4, 11), "{value}: {e}");
        assert!(e.message.contains(says), "{value}: {e}");
        assert!(e.to_string().contains("hint:"), "{value}: {e}");
    }
    // Only instances take addresses from it.
    let service = GOOD.replacen(
        "rack = \"madrid\"",
        "rack = \"madrid\"\nip_pool = \"203.0.113.20\"",
        1,
    );
    let e = error_of(&service);
    assert_eq!((e.line, e.column), (4, 11), "{e}");
    assert!(
        e.message.contains("only applies to kind = \"instances\""),
        "{e}"
    );
    // Not a string: toml's own error, located too.
    let e = error_of(&instances_with("ip_pool = 20"));
    assert_eq!(e.line, 4, "{e}");
}

#[test]
fn service_times_parse_override_the_defaults_and_are_written_back() {
    use racksim_sim::services::{ServiceTime, ServiceTimes};
    let s = parse("t.toml", GOOD).unwrap();
    assert_eq!(s.service_times, ServiceTimes::default());
    let text = good_with(
        "ntp_return_switch = \"switch1\"",
        "\n[service_times]\nrun = \"90s\"\nregister = \"20ms..300ms\"\nmgs = \"0s\"",
    );
    let s = parse("t.toml", &text).unwrap();
    assert_eq!(
        s.service_times.run,
        ServiceTime::Fixed(Duration::from_secs(90))
    );
    assert_eq!(
        s.service_times.mgs,
        ServiceTime::Fixed(Duration::ZERO),
        "{:?}",
        s.service_times
    );
    // Left out: upstream's default.
    assert_eq!(s.service_times.stop, ServiceTimes::default().stop);
    // The writer keeps what differs from the defaults, and only that.
    let written = super::write::scenario_toml(&s, &[]);
    assert!(
        written.contains("[service_times]\nrun = \"1m30s\"\nmgs = \"0s\"\n"),
        "{written}"
    );
    assert!(!written.contains("register ="), "{written}");
    assert_eq!(
        parse("w.toml", &written).unwrap().service_times,
        s.service_times
    );
    assert!(
        !super::write::scenario_toml(&parse("t.toml", GOOD).unwrap(), &[])
            .contains("service_times")
    );
}

#[test]
fn bad_service_times_are_located() {
    for (value, says) in [
        ("\"ninety seconds\"", "invalid duration \"ninety seconds\""),
        ("\"10s..2s\"", "empty range \"10s..2s\""),
        ("\"2s..\"", "invalid duration \"\""),
        ("90", "invalid type: integer `90`"),
    ] {
        let text = good_with(
            "ntp_return_switch = \"switch1\"",
            &format!("\n[service_times]\nrun = {value}"),
        );
        let e = refused_with(&text, says);
        // Line 7: the `run` line after the blank line and the table header.
        assert_eq!((e.line, e.column), (7, 7), "{value}: {e}");
    }
    let text = good_with(
        "ntp_return_switch = \"switch1\"",
        "\n[service_times]\nboot = \"90s\"",
    );
    let e = refused_with(&text, "unknown field `boot`");
    assert_eq!(e.line, 7, "{e}");
}

#[test]
fn database_steps_parse() {
    let text = format!(
        "{GOOD}\n[[step]]\nat = \"1m..1m10ms\"\naction = \"db-stall\"\nfor = \"9s\"\n\n[[step]]\nat = \"2m\"\naction = \"db-errors\"\nfor = \"2s\"\n"
    );
    let s = parse("t.toml", &text).unwrap();
    let stall = s
        .plan
        .steps
        .iter()
        .find(|st| matches!(st.action, Action::DbStall { .. }))
        .expect("the stall");
    assert_eq!(
        stall.action,
        Action::DbStall {
            window: Duration::from_secs(9)
        }
    );
    assert_eq!(
        stall.at,
        At::Window(Duration::from_secs(60), Duration::from_millis(60_010))
    );
    assert!(s.plan.steps.iter().any(|st| st.action
        == Action::DbErrors {
            window: Duration::from_secs(2)
        }));
    // Written back as read.
    let again = parse("t.toml", &write::scenario_toml(&s, &[])).unwrap();
    assert_eq!(again.plan, s.plan);
}

#[test]
fn bad_database_steps_are_rejected_where_they_are_wrong() {
    step_rejected(
        "action = \"db-stall\"",
        None,
        "action \"db-stall\" needs `for`",
    );
    step_rejected(
        "action = \"db-errors\"\nfor = \"0s\"",
        Some((27, 7)),
        "db-errors for 0s does nothing",
    );
    step_rejected(
        "action = \"db-stall\"\nfor = \"soon\"",
        Some((27, 7)),
        "soon",
    );
    step_rejected(
        "action = \"db-stall\"\nfor = \"9s\"\nswitch = \"switch0\"",
        Some((28, 10)),
        "action \"db-stall\" does not take `switch`",
    );
}

#[test]
fn the_removed_nat_window_is_refused_naming_db_stall() {
    let e = refused_with(
        &good_with("ntp_return_switch = \"switch1\"", "nat_window = \"2s\""),
        "`nat_window` was removed",
    );
    assert_eq!((e.line, e.column), (5, 14), "{e}");
    assert!(
        e.hint.as_deref().is_some_and(|h| h.contains("db-stall")),
        "{e}"
    );
}

/// A host on both sides of a partition, a heal or a latency would be cut
/// from itself: refused at `b`, naming the host (issue 39).
#[test]
fn a_host_on_both_sides_is_refused() {
    for (action, a, b) in [
        ("partition", "\"sled0\"", "\"sled0\""),
        (
            "partition",
            "[\"sled0\", \"sled1\"]",
            "[\"switch1\", \"sled1\"]",
        ),
        ("latency\"\nlatency = \"5ms", "\"sled0\"", "[\"sled0\"]"),
    ] {
        let e = refused_with(
            &with_steps(&[("1m", &format!("action = \"{action}\"\na = {a}\nb = {b}"))]),
            "is named in both `a` and `b`: a host cannot be cut off from itself",
        );
        assert!(e.source_line.starts_with("b = "), "{e}");
        assert_eq!(e.hint.as_deref(), Some("name each host on one side only"));
    }
    accepted(&[("1m", "action = \"partition\"\na = \"sled0\"\nb = \"sled1\"")]);
}

/// A second crash of a host that is down would do nothing: refused, as a
/// second `sidecar-power-off` is. A restart brings the host back (and a
/// restart of a host that is up is a reboot, allowed), as does a cold boot.
#[test]
fn a_host_that_is_down_cannot_crash_again() {
    const CRASH: &str = "action = \"crash\"\nhost = \"sled1\"";
    const RESTART: &str = "action = \"restart\"\nhost = \"sled1\"";
    let e = refused_with(
        &with_steps(&[("1m", CRASH), ("2m", CRASH)]),
        "crash sled1: sled1 is already down",
    );
    assert!(
        e.hint.as_deref().unwrap().contains("add a restart step"),
        "{e}"
    );
    accepted(&[("1m", CRASH), ("2m", RESTART), ("3m", CRASH)]);
    accepted(&[("1m", RESTART), ("2m", CRASH)]);
    accepted(&[
        ("1m", CRASH),
        ("2m", POWER_OFF),
        ("3m", COLD_BOOT),
        ("4m", CRASH),
    ]);
    // Windows that could put the restart before the crash are refused.
    let e = error_of(&with_steps(&[("1m..3m", CRASH), ("2m", RESTART)]));
    assert!(e.message.contains("can happen before"), "{e}");
}
