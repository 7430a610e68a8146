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

#[test]
fn a_good_file_parses() {
    let s = parse("t.toml", GOOD).unwrap();
    assert_eq!(s.plan.steps.len(), 2);
    assert_eq!(
        s.plan.steps[1].at,
        At::Window(Duration::from_secs(300), Duration::from_secs(480))
    );
    assert_eq!(
        s.expectations[&Variant::Nat(Strategy::SledTask)].outcome,
        Outcome::ConvergesWithin(Duration::from_secs(600))
    );
    assert_eq!(
        s.expectations[&Variant::Nat(Strategy::Legacy)].deadline,
        Duration::from_secs(7200)
    );
    // `converges` runs until `within` plus the stability window.
    assert_eq!(
        s.expectations[&Variant::Nat(Strategy::SledTask)].deadline,
        Duration::from_secs(660)
    );
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    for bad in ["", "5", "m", "5 minutes", "-1s", "1d"] {
        assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
    }
}

#[test]
fn unknown_field_points_at_it() {
    let e = error_of(&GOOD.replace("within = \"10m\"", "within = \"10m\"\nwithn = \"1m\""));
    assert_eq!((e.line, e.column), (19, 1), "{e}");
    assert!(e.message.contains("unknown field `withn`"), "{e}");
}

#[test]
fn bad_duration_points_at_the_value() {
    let e = error_of(&GOOD.replace("at = \"0s\"", "at = \"soon\""));
    assert_eq!((e.line, e.column), (7, 6), "{e}");
    assert!(e.message.contains("invalid duration \"soon\""), "{e}");
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

#[test]
fn healing_a_partition_never_made_is_rejected() {
    let e = error_of(&format!(
        "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"heal\"\na = \"sled0\"\nb = \"switch1\"\n"
    ));
    assert_eq!((e.line, e.column), (26, 10), "{e}");
    assert!(
        e.message
            .contains("heal of a partition that was never made"),
        "{e}"
    );
    // The same heal after its partition is fine.
    let ok = format!(
            "{GOOD}\n[[step]]\nat = \"30s\"\naction = \"partition\"\na = \"sled0\"\nb = \"switch1\"\n\n[[step]]\nat = \"1m\"\naction = \"heal\"\na = \"sled0\"\nb = \"switch1\"\n"
        );
    assert_eq!(parse("t.toml", &ok).unwrap().plan.steps.len(), 4);
}

#[test]
fn a_field_the_action_does_not_take_is_rejected() {
    let e = error_of(&format!(
        "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"power-off\"\nswitch = \"switch0\"\n"
    ));
    assert_eq!((e.line, e.column), (27, 10), "{e}");
    assert!(
        e.message
            .contains("action \"power-off\" does not take `switch`"),
        "{e}"
    );
}

#[test]
fn a_missing_field_and_an_unknown_action_are_rejected() {
    let e = error_of(&format!(
        "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"dpd-hang\"\nswitch = \"switch0\"\n"
    ));
    assert!(e.message.contains("action \"dpd-hang\" needs `for`"), "{e}");
    let e = error_of(&format!(
        "{GOOD}\n[[step]]\nat = \"1m\"\naction = \"explode\"\n"
    ));
    assert_eq!((e.line, e.column), (26, 10), "{e}");
    assert!(e.message.contains("unknown action \"explode\""), "{e}");
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
        let e = error_of(&format!("{GOOD}\n[[step]]\nat = \"1m\"\n{step}\n"));
        assert!(e.message.contains(message), "{step}: {e}");
    }
}

/// GOOD with these steps appended: `(at, the step's other lines)`.
fn with_steps(steps: &[(&str, &str)]) -> String {
    let mut text = GOOD.to_string();
    for (at, rest) in steps {
        text += &format!("\n[[step]]\nat = \"{at}\"\n{rest}\n");
    }
    text
}

/// The error for a step that must come after another but whose window
/// can draw a time before it.
fn overlap_error(steps: &[(&str, &str)]) -> ScenarioError {
    let e = error_of(&with_steps(steps));
    assert!(e.message.contains("can happen before"), "{e}");
    e
}

#[test]
fn a_cold_boot_whose_window_can_precede_the_power_off_is_rejected() {
    // Inside the power-off's window: sorted first, so it looks like a
    // cold boot with no power-off at all, but a power-off exists.
    let e = overlap_error(&[
        ("10m..14m", "action = \"power-off\""),
        ("12m..13m", "action = \"cold-boot\""),
    ]);
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
    let e = overlap_error(&[
        ("10m..14m", "action = \"power-off\""),
        ("12m..15m", "action = \"cold-boot\""),
    ]);
    assert_eq!((e.line, e.column), (29, 6), "{e}");
    // A fixed time inside the window.
    let e = overlap_error(&[
        ("10m..14m", "action = \"power-off\""),
        ("13m", "action = \"cold-boot\""),
    ]);
    assert_eq!(
        e.hint.as_deref(),
        Some("cold-boot must come after power-off in every draw; start it at 14m or later")
    );
    // Windows that touch are fine: a tie keeps plan order.
    let ok = with_steps(&[
        ("10m..12m", "action = \"power-off\""),
        ("12m..13m", "action = \"cold-boot\""),
    ]);
    assert!(parse("t.toml", &ok).is_ok());
}

#[test]
fn same_time_steps_run_in_file_order() {
    let e = overlap_error(&[
        ("10m", "action = \"cold-boot\""),
        ("10m", "action = \"power-off\""),
    ]);
    assert_eq!(e.line, 25, "{e}");
    assert_eq!(
        e.hint.as_deref(),
        Some(
            "both are at 10m and cold-boot is listed first, so it runs first; \
                 list the power-off step before it"
        )
    );
    let ok = with_steps(&[
        ("10m", "action = \"power-off\""),
        ("10m", "action = \"cold-boot\""),
    ]);
    assert!(parse("t.toml", &ok).is_ok());
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
    let ok = with_steps(&[("1m..2m", partition), ("2m..4m", heal)]);
    assert!(parse("t.toml", &ok).is_ok());
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
    let ok = with_steps(&[("10m", off), ("12m..14m", on), ("14m..15m", off)]);
    assert!(parse("t.toml", &ok).is_ok());
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

const INSTANCES: &str = r#"name = "i"
description = "d"
kind = "instances"
rack = "madrid"
ntp_return_switch = "switch0"

[[instance]]
name = "web1"

[[step]]
at = "1m"
action = "instance-create"
instance = "web1"
sled = "sled2"

[expect.saga]
outcome = "converges"
within = "5m"
"#;

#[test]
fn instance_scenarios_parse_with_start_implementations() {
    let s = parse("i.toml", INSTANCES).unwrap();
    assert_eq!(s.kind, Kind::Instances);
    assert_eq!(s.variant("saga").unwrap(), Variant::Start(StartImpl::Saga));
    assert!(
        s.variant("sled-task").is_err(),
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
    let e = error_of(&INSTANCES.replace("sled = \"sled2\"", "sled = \"sled9\""));
    assert_eq!((e.line, e.column), (14, 8), "{e}");
    assert!(e.message.contains("unknown sled \"sled9\""), "{e}");
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

/// A scenario on a rack declared in its file.
const DECLARED: &str = r#"name = "t"
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
    let e = error_of(&any);
    assert!(
        e.message
            .contains("needs `some_seeds_violate` or `verdict_mentions`"),
        "{e}"
    );
    assert!(e.hint.as_deref().unwrap().contains("could fail"), "{e}");
    let with_mentions = any.replace(
        "deadline = \"2h\"",
        "deadline = \"2h\"\nverdict_mentions = [\"switch1\"]",
    );
    assert!(parse("t.toml", &with_mentions).is_ok());

    let misplaced = GOOD.replace(
        "outcome = \"fails\"\ndeadline = \"2h\"",
        "outcome = \"fails\"\ndeadline = \"2h\"\nrepair_within = \"5s\"",
    );
    let e = error_of(&misplaced);
    assert!(e.message.contains("`repair_within` only applies"), "{e}");
    assert_eq!(e.line, 23);

    let bounds = GOOD.replace(
        "within = \"10m\"",
        "within = \"10m\"\nconverged_by = \"1m\"\nrepair_within = \"5s\"",
    );
    let s = parse("t.toml", &bounds).unwrap();
    let exp = &s.expectations[&s.variant("sled-task").unwrap()];
    assert_eq!(exp.converged_by, Some(Duration::from_secs(60)));
    assert_eq!(exp.repair_within, Some(Duration::from_secs(5)));
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

#[test]
fn config_changes_parse_and_refer_to_zones_by_kind_and_ordinal() {
    let text = config_steps(&[
        ("1m", "change = \"add-zone\"\nzone = \"nexus\"\nsled = \"sled2\""),
        ("2m", "change = \"move-zone\"\nzone = \"nexus.1\"\nsled = \"sled0\""),
        ("3m", "change = \"remove-zone\"\nzone = \"nexus.0\""),
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
        (
            "1m",
            "change = \"add-zone\"\nzone = \"nexus\"\nsled = \"sled2\"",
        ),
        ("2m", "change = \"remove-zone\"\nzone = \"nexus\""),
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
        ("1m", "change = \"remove-zone\"\nzone = \"nexus\""),
        (
            "2m",
            "change = \"move-zone\"\nzone = \"nexus\"\nsled = \"sled2\"",
        ),
    ]);
    assert_eq!(parse("t.toml", &text).unwrap().plan.steps.len(), 4);
    // A valid removal does change them.
    let e = error_of(&config_steps(&[
        (
            "1m",
            "change = \"add-zone\"\nzone = \"nexus\"\nsled = \"sled2\"",
        ),
        ("2m", "change = \"remove-zone\"\nzone = \"nexus.0\""),
        (
            "3m",
            "change = \"move-zone\"\nzone = \"nexus.0\"\nsled = \"sled2\"",
        ),
    ]));
    assert!(e.message.contains("no zone nexus.0"), "{e}");
}

#[test]
fn config_changes_whose_windows_overlap_are_rejected() {
    let e = error_of(&config_steps(&[
        (
            "1m..3m",
            "change = \"add-zone\"\nzone = \"nexus\"\nsled = \"sled2\"",
        ),
        ("2m", "change = \"remove-zone\"\nzone = \"nexus.1\""),
    ]));
    assert!(e.message.contains("can happen before"), "{e}");
}
